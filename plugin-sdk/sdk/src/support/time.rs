//! Dates and times as services send them and as agents write them: ISO 8601 / RFC 3339 with any
//! offset, bare dates, Unix seconds or milliseconds.

use time::format_description::well_known::Rfc3339;
use time::{Date, OffsetDateTime, PrimitiveDateTime, Time};

/// Parses an agent's or a service's timestamp into Unix milliseconds: RFC 3339
/// (`2024-05-01T09:30:00Z`, `…+02:00`, fractional seconds), an ISO date-time without a zone or
/// with a space for `T` (read as UTC), a bare date (`2024-05-01`, midnight UTC), Jira's
/// `2024-05-01T09:30:00.000+0200`, or digits (Unix milliseconds; seconds when at most 10 digits).
pub fn parse_timestamp_ms(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let bad = || {
        format!("`{t}` is not a date or time; write e.g. `2024-05-01` or `2024-05-01T09:30:00Z`")
    };
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        let n: i64 = t.parse().map_err(|_| bad())?;
        return Ok(if t.len() <= 10 { n * 1000 } else { n });
    }
    let normalized = normalize(t);
    let instant = OffsetDateTime::parse(&normalized, &Rfc3339)
        .or_else(|_| {
            let date_only = time::macros::format_description!("[year]-[month]-[day]");
            Date::parse(&normalized, &date_only)
                .map(|d| PrimitiveDateTime::new(d, Time::MIDNIGHT).assume_utc())
        })
        .map_err(|_| bad())?;
    Ok((instant.unix_timestamp_nanos() / 1_000_000) as i64)
}

/// `2024-05-01 09:30` → `2024-05-01T09:30:00Z`; `…+0200` → `…+02:00`; leaves RFC 3339 alone.
fn normalize(t: &str) -> String {
    if t.len() <= 10 || !t.is_char_boundary(10) {
        return t.to_owned();
    }
    let (date, rest) = t.split_at(10);
    let rest = rest.strip_prefix(['T', 't', ' ']).unwrap_or(rest);
    let (clock, zone) = rest.split_at(rest.find(['Z', 'z', '+', '-']).unwrap_or(rest.len()));
    let clock = if clock.len() == 5 { format!("{clock}:00") } else { clock.to_owned() };
    let zone = match zone {
        "" => "Z".to_owned(),
        z if z.len() == 5 && !z.contains(':') => format!("{}:{}", &z[..3], &z[3..]),
        z => z.to_owned(),
    };
    format!("{date}T{clock}{zone}")
}

/// Unix milliseconds as RFC 3339 UTC to the second: `2019-09-06T14:34:10Z`.
pub fn format_unix_ms(ms: i64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.replace_nanosecond(0).ok())
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| ms.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_and_services_spell_times_many_ways() {
        let utc = 1_714_555_800_000; // 2024-05-01T09:30:00Z
        for text in [
            "2024-05-01T09:30:00Z",
            "2024-05-01T11:30:00+02:00",
            "2024-05-01T11:30:00.000+0200",
            "2024-05-01 09:30:00",
            "2024-05-01T09:30:00",
            "2024-05-01T09:30",
            "1714555800",
            "1714555800000",
        ] {
            assert_eq!(parse_timestamp_ms(text), Ok(utc), "{text}");
        }
        assert_eq!(parse_timestamp_ms("2024-05-01"), Ok(1_714_521_600_000));
        assert_eq!(parse_timestamp_ms("2024-05-01T09:30:00.250Z"), Ok(utc + 250));
        let err = parse_timestamp_ms("next tuesday").unwrap_err();
        assert!(err.contains("`next tuesday` is not a date"), "{err}");
        assert!(parse_timestamp_ms("2024-13-01").is_err());
    }

    #[test]
    fn milliseconds_format_as_utc_seconds() {
        assert_eq!(format_unix_ms(1_567_780_450_202), "2019-09-06T14:34:10Z");
        assert_eq!(format_unix_ms(0), "1970-01-01T00:00:00Z");
    }
}
