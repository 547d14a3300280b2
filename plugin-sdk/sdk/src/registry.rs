//! Tool registration: each tool is declared once, next to its argument type, and collected with
//! `inventory` so the provider's manifest and its dispatch can never disagree.

use std::any::{Any, TypeId};
use std::future::Future;
use std::pin::Pin;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::{Provider, ToolContext, ToolError, ToolErrorKind, ToolResult, ToolSpec};

/// A boxed future borrowing the provider for `'a`.
pub type CallFuture<'a> = Pin<Box<dyn Future<Output = ToolResult> + Send + 'a>>;

/// One registered tool. Built by [`register_tool!`](crate::register_tool); not written by hand.
pub struct ToolRegistration {
    /// The provider type that serves the tool (several providers may share one binary in tests).
    pub provider: fn() -> TypeId,
    /// The tool's name, as in its spec.
    pub name: &'static str,
    /// Builds the tool's spec (its schema is generated from the argument type).
    pub spec: fn() -> ToolSpec,
    /// Runs the tool on a provider of type `provider`.
    pub call: for<'a> fn(&'a (dyn Any + Send + Sync), Value, ToolContext) -> CallFuture<'a>,
}

inventory::collect!(ToolRegistration);

/// The tools registered for provider `P`, sorted by name.
pub fn registered_tools<P: Provider>() -> Vec<&'static ToolRegistration> {
    let mut tools: Vec<_> = inventory::iter::<ToolRegistration>
        .into_iter()
        .filter(|r| (r.provider)() == TypeId::of::<P>())
        .collect();
    tools.sort_by_key(|r| r.name);
    tools
}

pub(crate) async fn dispatch<P: Provider>(
    provider: &P,
    tool: &str,
    args: Value,
    ctx: ToolContext,
) -> ToolResult {
    let tools = registered_tools::<P>();
    match tools.iter().find(|r| r.name == tool) {
        Some(registration) => (registration.call)(provider, args, ctx).await,
        None => {
            let known: Vec<_> = tools.iter().map(|r| r.name).collect();
            ToolResult::error(
                ToolErrorKind::UnknownTool,
                format!(
                    "provider `{}` has no tool `{tool}`; its tools are: {}",
                    P::NAME,
                    known.join(", ")
                ),
            )
        }
    }
}

/// The schema of what a tool returns: of the type as it *serializes* — a field skipped when empty
/// (`skip_serializing_if`) is not required, since results leave it out — where `schema_for!`
/// describes what deserializes, which would promise fields a result may not have.
pub fn output_schema_of<T: JsonSchema>() -> Value {
    schemars::generate::SchemaSettings::default()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value()
}

/// Builds a spec from the argument type's schema. Used by [`register_tool!`](crate::register_tool).
pub fn spec_of<A: JsonSchema>(
    name: &str,
    group: Option<&str>,
    description: &str,
    output_schema: Option<Value>,
    sensitive_params: &[&str],
) -> ToolSpec {
    let mut input_schema = schemars::schema_for!(A).to_value();
    // The tool's description says what the tool does; the argument type's doc title is noise, and
    // `$schema` costs every client tokens to say what MCP already implies.
    if let Some(map) = input_schema.as_object_mut() {
        map.remove("$schema");
        map.remove("title");
        map.remove("description");
    }
    ToolSpec {
        name: name.to_owned(),
        group: group.map(str::to_owned),
        description: description.to_owned(),
        input_schema,
        output_schema,
        sensitive_params: sensitive_params.iter().map(|s| (*s).to_owned()).collect(),
    }
}

/// Parses the arguments, runs the handler and turns its outcome into a result. Used by
/// [`register_tool!`](crate::register_tool).
pub async fn call_handler<'a, P, A, T, F, Fut>(
    provider: &'a (dyn Any + Send + Sync),
    tool: &'static str,
    args: Value,
    ctx: ToolContext,
    handler: F,
) -> ToolResult
where
    P: Provider,
    A: DeserializeOwned,
    T: Serialize,
    F: FnOnce(&'a P, A, ToolContext) -> Fut,
    Fut: Future<Output = Result<T, ToolError>> + 'a,
{
    let Some(provider) = provider.downcast_ref::<P>() else {
        return ToolResult::error(
            ToolErrorKind::Internal,
            format!("tool `{tool}` was dispatched to a provider of another type"),
        );
    };
    // A call without arguments arrives as null; tools whose arguments are all optional accept it.
    let args = if args.is_null() { Value::Object(Default::default()) } else { args };
    let args: A = match serde_json::from_value(args) {
        Ok(args) => args,
        Err(e) => {
            return ToolResult::error(
                ToolErrorKind::InvalidArguments,
                format!("invalid arguments for `{}.{tool}`: {e}", P::NAME),
            )
        }
    };
    let authors = ctx.authors.clone();
    let request_ids = ctx.request_ids.clone();
    let result = match handler(provider, args, ctx).await {
        Ok(value) => match serde_json::to_value(value) {
            Ok(value) => ToolResult::from_json(value)
                .with_collected(quiver_core::tool::AUTHORS_METADATA, &authors),
            Err(e) => ToolResult::error(
                ToolErrorKind::Internal,
                format!("`{}.{tool}` produced a result that is not JSON: {e}", P::NAME),
            ),
        },
        Err(e) => e.into(),
    };
    // Failed calls too: a service's id of a refused request is what its support asks for.
    result.with_collected(quiver_core::tool::REQUEST_IDS_METADATA, &request_ids)
}

/// Declares a tool of a provider: its name, description, argument type and handler.
///
/// The handler is an `async fn(&Provider, Args, &ToolContext) -> Result<impl Serialize, ToolError>`
/// (usually a method). Optional keys: `group: "issues"`, `output: Type` (a `JsonSchema` type that
/// documents the result), `sensitive: ["token"]` (argument names never logged).
///
/// ```text
/// register_tool! {
///     provider: GitHub,
///     name: "get_issue",
///     group: "issues",
///     description: "Get one issue with its labels, assignees and body.",
///     input: GetIssueArgs,
///     handler: GitHub::get_issue,
/// }
/// ```
#[macro_export]
macro_rules! register_tool {
    (
        provider: $provider:ty,
        name: $name:literal,
        $(group: $group:literal,)?
        description: $description:expr,
        input: $input:ty,
        $(output: $output:ty,)?
        $(sensitive: [$($sensitive:literal),* $(,)?],)?
        handler: $handler:path $(,)?
    ) => {
        const _: () = {
            fn provider_type() -> ::std::any::TypeId {
                ::std::any::TypeId::of::<$provider>()
            }
            fn spec() -> $crate::ToolSpec {
                #[allow(unused_mut, unused_assignments)]
                let mut group: ::std::option::Option<&str> = ::std::option::Option::None;
                $(group = ::std::option::Option::Some($group);)?
                #[allow(unused_mut, unused_assignments)]
                let mut output: ::std::option::Option<$crate::serde_json::Value> =
                    ::std::option::Option::None;
                $(output = ::std::option::Option::Some(
                    $crate::__private::output_schema_of::<$output>()
                );)?
                $crate::__private::spec_of::<$input>(
                    $name,
                    group,
                    $description,
                    output,
                    &[$($($sensitive),*)?],
                )
            }
            fn call<'a>(
                provider: &'a (dyn ::std::any::Any + ::std::marker::Send + ::std::marker::Sync),
                args: $crate::serde_json::Value,
                ctx: $crate::ToolContext,
            ) -> ::std::pin::Pin<
                ::std::boxed::Box<
                    dyn ::std::future::Future<Output = $crate::ToolResult>
                        + ::std::marker::Send
                        + 'a,
                >,
            > {
                ::std::boxed::Box::pin($crate::__private::call_handler::<$provider, $input, _, _, _>(
                    provider,
                    $name,
                    args,
                    ctx,
                    |provider: &'a $provider, args: $input, ctx: $crate::ToolContext| async move {
                        $handler(provider, args, &ctx).await
                    },
                ))
            }
            $crate::__private::inventory::submit! {
                $crate::ToolRegistration { provider: provider_type, name: $name, spec, call }
            }
        };
    };
}
