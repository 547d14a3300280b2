//! `cargo xtask select-table`: the selector on every public evaluation set with every ranker, in
//! one run, as one markdown table — the table the README's selection figures come from.
//!
//! Sets: MetaTool's test part (`../shared/benchmarks/metatool`, the tune part being what was
//! tuned on), and every `tests/data/NAME/` holding `tools.json`, `queries.jsonl` and
//! `gold.jsonl` (BFCL, ToolBench, catalogues of real MCP servers) — the test part of those in
//! [`TUNED_ON`], whole otherwise. Rankers: words alone
//! (BM25F), the default (words and the distilled vectors), all-MiniLM-L6-v2's cosine alone, and
//! words fused with it. Each cell is `quiver select --gold`'s whole-gold-set recall at 1, 3, 5
//! and 10, and how often the selected set holds the gold set, at how many tools — by the
//! default rule (the lift share) and by τ alone (`--lift-share 0`), the rule before it.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// The sets of `tests/data/` whose tune part (ids ending in a multiple of 4) a default was
/// chosen on — Arcade's, with MetaTool's, for the lift share: only their test part is reported.
const TUNED_ON: &[&str] = &["arcade"];

/// One ranker: its name in the table, the flags that make it, and its default lift share
/// (`quiver_core::select::default_lift_share`: 0.45 with a neural model, 0.4 on words alone,
/// else 0.5).
struct Ranker {
    name: &'static str,
    flags: Vec<String>,
    lift_share: &'static str,
}

/// One evaluation set: its name, files, and the part reported.
struct EvalSet {
    name: String,
    dir: PathBuf,
    part: Option<&'static str>,
}

/// A row's figures, as `quiver select --gold` prints them.
#[derive(Default)]
struct Figures {
    at: [f64; 4],
    /// Per `selected` line, in the order printed (the lift share, then τ alone): the cell.
    selected: Vec<String>,
}

pub(crate) fn select_table(
    quiver: &Path,
    root: &Path,
    minilm: &Path,
    args: &[String],
) -> Result<()> {
    let mut sets = Vec::new();
    let metatool = root.join("..").join("shared").join("benchmarks").join("metatool");
    if metatool.join("tools.json").exists() {
        sets.push(EvalSet {
            name: "MetaTool (test part)".into(),
            dir: metatool,
            part: Some("test"),
        });
    } else {
        eprintln!("xtask: no MetaTool at {}; its row is left out", metatool.display());
    }
    let data = root.join("tests").join("data");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&data)
        .with_context(|| format!("cannot read {}", data.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|d| {
            ["tools.json", "queries.jsonl", "gold.jsonl"].iter().all(|f| d.join(f).exists())
        })
        .collect();
    dirs.sort();
    for dir in dirs {
        let name = dir.file_name().unwrap_or_default().to_string_lossy().into_owned();
        if TUNED_ON.contains(&name.as_str()) {
            sets.push(EvalSet { name: format!("{name} (test part)"), dir, part: Some("test") });
        } else {
            sets.push(EvalSet { name, dir, part: None });
        }
    }
    if let Some(only) = args.first() {
        sets.retain(|s| s.name.to_lowercase().contains(&only.to_lowercase()));
    }
    let model = minilm.display().to_string();
    let rankers = [
        Ranker {
            name: "words alone (BM25F)",
            flags: vec!["--lexical-only".into()],
            lift_share: "0.4",
        },
        Ranker { name: "default (words + distilled)", flags: vec![], lift_share: "0.5" },
        Ranker {
            name: "MiniLM cosine alone",
            flags: vec![
                "--local-model".into(),
                model.clone(),
                "--lexical-weight".into(),
                "0".into(),
            ],
            lift_share: "0.45",
        },
        Ranker {
            name: "words + MiniLM",
            flags: vec!["--local-model".into(), model],
            lift_share: "0.45",
        },
    ];
    // The table goes to stdout, row by row as each is measured.
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "| set | ranker | all@1 | all@3 | all@5 | all@10 | selected set holds the gold set | by τ alone |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|---|---|")?;
    for set in &sets {
        for ranker in &rankers {
            let figures = run_select(quiver, set, ranker)?;
            writeln!(
                out,
                "| {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {} | {} |",
                set.name,
                ranker.name,
                figures.at[0],
                figures.at[1],
                figures.at[2],
                figures.at[3],
                figures.selected.first().map_or("", String::as_str),
                figures.selected.get(1).map_or("", String::as_str),
            )?;
            out.flush()?;
        }
    }
    Ok(())
}

fn run_select(quiver: &Path, set: &EvalSet, ranker: &Ranker) -> Result<Figures> {
    let data_dir = tempfile_dir()?;
    let mut command = Command::new(quiver);
    command
        .arg("select")
        .arg("--tools")
        .arg(set.dir.join("tools.json"))
        .arg("--queries")
        .arg(set.dir.join("queries.jsonl"))
        .arg("--gold")
        .arg(set.dir.join("gold.jsonl"))
        .args(&ranker.flags)
        .args(["--lift-share", &format!("{},0", ranker.lift_share)])
        // No machine config or cached enrichments of another run.
        .env("QUIVER_DATA_DIR", &data_dir)
        .env_remove("QUIVER_CONFIG");
    if let Some(part) = set.part {
        command.args(["--part", part]);
    }
    let out = command.output().with_context(|| format!("cannot run {}", quiver.display()))?;
    let _ = std::fs::remove_dir_all(&data_dir);
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        bail!("quiver select on {} ({}) failed:\n{text}", set.name, ranker.name);
    }
    Ok(parse(&text))
}

/// The figures of `quiver select --gold`'s report.
fn parse(text: &str) -> Figures {
    let mut figures = Figures::default();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if let [k, whole, _] = fields.as_slice() {
            let slot = match *k {
                "1" => 0,
                "3" => 1,
                "5" => 2,
                "10" => 3,
                _ => continue,
            };
            figures.at[slot] = whole.parse().unwrap_or(0.0);
        }
        if let Some(cell) = selected_cell(line) {
            figures.selected.push(cell);
        }
    }
    figures
}

/// `selected (τ 0.17, lift 0.5, at most 20): whole gold set in 0.968, 5.0 tools (2719 tokens) on
/// average` as `.968 at τ 0.17, 5.0 tools (2,719 tokens)`.
fn selected_cell(line: &str) -> Option<String> {
    let rest = line.strip_prefix("selected (τ ")?;
    let (threshold, rest) = rest.split_once(',')?;
    let (_, rest) = rest.split_once("whole gold set in ")?;
    let (share, rest) = rest.split_once(", ")?;
    let (tools, rest) = rest.split_once(" tools (")?;
    let tokens: u64 = rest.split_once(' ')?.0.parse().ok()?;
    let share = share.trim_start_matches('0');
    let tokens = tokens.to_string();
    let mut grouped = String::new();
    for (i, digit) in tokens.chars().enumerate() {
        if i > 0 && (tokens.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    Some(format!("{share} at τ {threshold}, {tools} tools ({grouped} tokens)"))
}

fn tempfile_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "quiver-select-table-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot make {}", dir.display()))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selected_set_line_becomes_a_table_cell() {
        let line = "selected (τ 0.17, lift 0.5, at most 20): whole gold set in 0.968, 5.0 tools \
                    (2719 tokens) on average";
        assert_eq!(selected_cell(line).unwrap(), ".968 at τ 0.17, 5.0 tools (2,719 tokens)");
        let line = "selected (τ 0.1, at most 20, 500 tokens): whole gold set in 0.770, 3.5 tools \
                    (449 tokens) on average";
        assert_eq!(selected_cell(line).unwrap(), ".770 at τ 0.1, 3.5 tools (449 tokens)");
        assert_eq!(selected_cell("recall over 52 queries"), None);
    }
}
