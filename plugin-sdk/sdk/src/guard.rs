//! The panic guard around every function the plugin exports.
//!
//! A panic that unwinds out of an `extern "C"` function aborts the whole host (abi_stable aborts,
//! destructors do not run, nothing is flushed). So every exported function runs its body under
//! `catch_unwind`, and a panic becomes an error message naming what panicked.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use abi_stable::std_types::{RResult, RString};

/// Runs `body`, turning an `Err` or a panic into `RErr` with a message; `what` names the operation
/// for the message ("tool `get_issue`", "initialisation").
pub(crate) fn guarded<T>(
    provider: &str,
    what: &str,
    body: impl FnOnce() -> Result<T, String>,
) -> RResult<T, RString> {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(value)) => RResult::ROk(value),
        Ok(Err(message)) => RResult::RErr(message.into()),
        Err(payload) => RResult::RErr(
            format!("provider `{provider}` panicked during {what}: {}", panic_message(&*payload))
                .into(),
        ),
    }
}

/// The text of a panic payload (`panic!("...")` carries a `&str` or a `String`).
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_an_error_naming_the_operation() {
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let result: RResult<(), RString> =
            guarded("demo", "tool `boom`", || panic!("index out of bounds"));
        std::panic::set_hook(hook);
        assert_eq!(
            result.into_result().unwrap_err().as_str(),
            "provider `demo` panicked during tool `boom`: index out of bounds"
        );
    }

    #[test]
    fn errors_and_values_pass_through() {
        assert_eq!(guarded("demo", "x", || Ok::<_, String>(5)).into_result().unwrap(), 5);
        let err = guarded::<()>("demo", "x", || Err("no token".into())).into_result().unwrap_err();
        assert_eq!(err.as_str(), "no token");
    }
}
