//! Resources and prompts of the upstreams quiver fronts, served as its own: each upstream's
//! prompts and resources listed under its prefix (`everything_simple-prompt`, a resource's
//! `name` prefixed), resource URIs kept as the server wrote them so every `everything://…` a
//! client saw stays resolvable, and reads and gets routed to the upstream that listed them.
//! What comes back is masked like every upstream answer.
//!
//! A URI is routed to the upstream that listed it, else to the one whose URI template it fits,
//! else to the first upstream with resources that can read it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use quiver_runtime::host::Host;
use quiver_runtime::upstream::Upstream;
use rmcp::model::{
    GetPromptRequestParams, GetPromptResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ReadResourceRequestParams, ReadResourceResult,
};
use rmcp::ErrorData as McpError;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Which upstream listed each resource URI and each prompt, as quiver last listed them.
#[derive(Default)]
pub(crate) struct Routes {
    resources: Mutex<HashMap<String, String>>,
    prompts: Mutex<HashMap<String, (String, String)>>,
}

/// The ready upstreams that declared resources (or prompts, with `prompts`).
fn serving(host: &Host, prompts: bool) -> Vec<Arc<Upstream>> {
    host.upstreams()
        .all()
        .iter()
        .filter(|u| {
            let (resources, has_prompts) = u.serves_resources_and_prompts();
            if prompts {
                has_prompts
            } else {
                resources
            }
        })
        .cloned()
        .collect()
}

/// Whether any upstream serves resources, prompts, and completions.
pub(crate) fn capabilities(host: &Host) -> (bool, bool, bool) {
    let completions = host.upstreams().all().iter().any(|u| u.serves_completions());
    let resources = !serving(host, false).is_empty() || !host.provider_resources().is_empty();
    (resources, !serving(host, true).is_empty(), completions)
}

/// Whether any upstream takes resource subscriptions.
pub(crate) fn subscriptions(host: &Host) -> bool {
    host.upstreams().all().iter().any(|u| u.serves_subscriptions())
}

fn upstream_error(upstream: &Upstream, what: &str, e: impl std::fmt::Display) -> McpError {
    McpError::internal_error(
        format!(
            "upstream `{}` could not {what}: {}",
            upstream.name(),
            quiver_runtime::logging::scrub(&e.to_string())
        ),
        None,
    )
}

/// `value` masked of every secret, as `T`.
fn masked<T: DeserializeOwned + serde::Serialize>(value: &T) -> Result<T, McpError> {
    let mut json = serde_json::to_value(value)
        .map_err(|e| McpError::internal_error(format!("an upstream answer: {e}"), None))?;
    quiver_runtime::logging::scrub_json(&mut json);
    serde_json::from_value(json)
        .map_err(|e| McpError::internal_error(format!("an upstream answer: {e}"), None))
}

/// A listed item with its `name` prefixed for `upstream`.
fn with_prefixed_name<T: DeserializeOwned + serde::Serialize>(
    item: &T,
    upstream: &Upstream,
) -> Option<(T, Value)> {
    let mut json = serde_json::to_value(item).ok()?;
    if let Some(name) = json.get("name").and_then(Value::as_str) {
        json["name"] = Value::String(upstream.prefixed(name));
    }
    quiver_runtime::logging::scrub_json(&mut json);
    Some((serde_json::from_value(json.clone()).ok()?, json))
}

impl Routes {
    /// Every upstream's resources, in one page.
    pub(crate) async fn list_resources(
        &self,
        host: &Host,
    ) -> Result<ListResourcesResult, McpError> {
        let mut all = Vec::new();
        let mut routes = HashMap::new();
        for upstream in serving(host, false) {
            let Some(peer) = upstream.peer() else { continue };
            let listed = peer
                .list_all_resources()
                .await
                .map_err(|e| upstream_error(&upstream, "list resources", e))?;
            for resource in &listed {
                if let Some((resource, json)) = with_prefixed_name(resource, &upstream) {
                    if let Some(uri) = json.get("uri").and_then(Value::as_str) {
                        routes.insert(uri.to_owned(), upstream.name().to_owned());
                    }
                    all.push(resource);
                }
            }
        }
        self.resources.lock().unwrap_or_else(|e| e.into_inner()).extend(routes);
        Ok(ListResourcesResult::with_all_items(all))
    }

    /// Every upstream's resource templates, in one page.
    pub(crate) async fn list_resource_templates(
        &self,
        host: &Host,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        // The plugins' resource families, each read by one of its provider's tools.
        let mut all: Vec<rmcp::model::ResourceTemplate> = host
            .provider_resources()
            .iter()
            .filter_map(|r| {
                serde_json::from_value(serde_json::json!({
                    "uriTemplate": r.template.uri_template,
                    "name": format!("{}_{}", r.provider, r.template.name),
                    "description": r.template.description,
                    "mimeType": r.template.mime_type,
                }))
                .ok()
            })
            .collect();
        for upstream in serving(host, false) {
            let Some(peer) = upstream.peer() else { continue };
            let listed = peer
                .list_all_resource_templates()
                .await
                .map_err(|e| upstream_error(&upstream, "list resource templates", e))?;
            all.extend(
                listed.iter().filter_map(|t| with_prefixed_name(t, &upstream)).map(|(t, _)| t),
            );
        }
        Ok(ListResourceTemplatesResult::with_all_items(all))
    }

    /// Reads `uri` from the upstream it belongs to.
    pub(crate) async fn read_resource(
        &self,
        host: &Host,
        request: ReadResourceRequestParams,
    ) -> Result<ReadResourceResult, McpError> {
        let uri = request.uri.clone();
        let candidates = self.owners(host, &uri).await;
        let mut last_error = None;
        for upstream in candidates {
            let Some(peer) = upstream.peer() else { continue };
            match peer.read_resource(request.clone()).await {
                Ok(result) => return masked(&result),
                Err(e) => last_error = Some(upstream_error(&upstream, &format!("read {uri}"), e)),
            }
        }
        Err(last_error.unwrap_or_else(|| {
            McpError::resource_not_found(
                format!("no upstream serves {uri}; resources/list shows what there is"),
                None,
            )
        }))
    }

    /// Subscribes a client to changes of `uri` at the upstream it belongs to; that upstream's
    /// name, for [`Routes::unsubscribe`] and for telling its updates apart.
    pub(crate) async fn subscribe(&self, host: &Host, uri: &str) -> Result<String, McpError> {
        let owner = self
            .owners(host, uri)
            .await
            .into_iter()
            .find(|u| u.serves_subscriptions())
            .ok_or_else(|| {
                McpError::invalid_params(
                    format!(
                        "no upstream that serves {uri} takes subscriptions; read it again to see \
                         whether it changed"
                    ),
                    None,
                )
            })?;
        owner
            .subscribe_resource(uri)
            .await
            .map_err(|e| upstream_error(&owner, &format!("subscribe to {uri}"), e))?;
        Ok(owner.name().to_owned())
    }

    /// Ends a client's subscription to `uri` at `upstream`.
    pub(crate) async fn unsubscribe(
        host: &Host,
        upstream: &str,
        uri: &str,
    ) -> Result<(), McpError> {
        let Some(owner) = host.upstreams().get(upstream) else { return Ok(()) };
        owner
            .unsubscribe_resource(uri)
            .await
            .map_err(|e| upstream_error(owner, &format!("unsubscribe from {uri}"), e))
    }

    /// The upstreams that may serve `uri`, likeliest first.
    async fn owners(&self, host: &Host, uri: &str) -> Vec<Arc<Upstream>> {
        let listed = self.resources.lock().unwrap_or_else(|e| e.into_inner()).get(uri).cloned();
        let mut candidates = serving(host, false);
        match listed.as_deref() {
            // The one that listed it first, then the rest.
            Some(listed) => candidates.sort_by_key(|u| u.name() != listed),
            // A URI nobody listed (a template's): those whose templates it fits first — asked
            // for their templates only then, not on every read.
            None => {
                let mut fits = HashMap::new();
                for upstream in &candidates {
                    let Some(peer) = upstream.peer() else { continue };
                    if let Ok(templates) = peer.list_all_resource_templates().await {
                        let fit = templates.iter().any(|t| {
                            let template = t.uri_template.as_str();
                            let fixed = template.split('{').next().unwrap_or(template);
                            !fixed.is_empty() && uri.starts_with(fixed)
                        });
                        fits.insert(upstream.name().to_owned(), fit);
                    }
                }
                candidates.sort_by_key(|u| !fits.get(u.name()).copied().unwrap_or(false));
            }
        }
        candidates
    }

    /// Every upstream's prompts, in one page, under their upstream's prefix.
    pub(crate) async fn list_prompts(&self, host: &Host) -> Result<ListPromptsResult, McpError> {
        let mut all = Vec::new();
        let mut routes = HashMap::new();
        for upstream in serving(host, true) {
            let Some(peer) = upstream.peer() else { continue };
            let listed = peer
                .list_all_prompts()
                .await
                .map_err(|e| upstream_error(&upstream, "list prompts", e))?;
            for prompt in &listed {
                let original = prompt.name.to_string();
                if let Some((prompt, _)) = with_prefixed_name(prompt, &upstream) {
                    routes.insert(prompt.name.to_string(), (upstream.name().to_owned(), original));
                    all.push(prompt);
                }
            }
        }
        *self.prompts.lock().unwrap_or_else(|e| e.into_inner()) = routes;
        Ok(ListPromptsResult::with_all_items(all))
    }

    /// The upstream and own name of prompt `name` as quiver lists it, listing the prompts again
    /// when it is not known yet (a client may use a name an earlier connection saw).
    async fn prompt_route(&self, host: &Host, name: &str) -> Result<(String, String), McpError> {
        let known = |routes: &Self| {
            routes.prompts.lock().unwrap_or_else(|e| e.into_inner()).get(name).cloned()
        };
        if let Some(route) = known(self) {
            return Ok(route);
        }
        self.list_prompts(host).await?;
        known(self).ok_or_else(|| {
            McpError::invalid_params(format!("no prompt `{name}`; prompts/list shows them"), None)
        })
    }

    /// Completes an argument of a prompt (as quiver lists it) or of a resource template, by the
    /// upstream that serves it.
    pub(crate) async fn complete(
        &self,
        host: &Host,
        mut request: rmcp::model::CompleteRequestParams,
    ) -> Result<rmcp::model::CompleteResult, McpError> {
        let upstream = match &mut request.r#ref {
            rmcp::model::Reference::Prompt(prompt) => {
                let (upstream, original) = self.prompt_route(host, &prompt.name).await?;
                prompt.name = original;
                host.upstreams().get(&upstream).cloned()
            }
            rmcp::model::Reference::Resource(template) => {
                let mut found = None;
                for upstream in serving(host, false) {
                    let Some(peer) = upstream.peer() else { continue };
                    let listed = peer.list_all_resource_templates().await.unwrap_or_default();
                    if listed.iter().any(|t| t.uri_template == template.uri) {
                        found = Some(upstream);
                        break;
                    }
                }
                found
            }
            // A kind of reference a later revision adds: nobody here serves it.
            _ => None,
        };
        let Some(upstream) = upstream.filter(|u| u.serves_completions()) else {
            // Nothing to suggest is an empty completion, as the spec's servers answer.
            return Ok(rmcp::model::CompleteResult::default());
        };
        let Some(peer) = upstream.peer() else {
            return Ok(rmcp::model::CompleteResult::default());
        };
        let result =
            peer.complete(request).await.map_err(|e| upstream_error(&upstream, "complete", e))?;
        masked(&result)
    }

    /// Gets prompt `request.name` (as quiver lists it) from its upstream.
    pub(crate) async fn get_prompt(
        &self,
        host: &Host,
        mut request: GetPromptRequestParams,
    ) -> Result<GetPromptResult, McpError> {
        let (upstream, original) = self.prompt_route(host, &request.name).await?;
        let Some(upstream) = host.upstreams().get(&upstream).cloned() else {
            return Err(McpError::internal_error(format!("upstream `{upstream}` is gone"), None));
        };
        let Some(peer) = upstream.peer() else {
            return Err(McpError::internal_error(
                format!(
                    "upstream `{}` is unavailable; its prompts return once it restarts",
                    upstream.name()
                ),
                None,
            ));
        };
        request.name = original;
        let result = peer
            .get_prompt(request)
            .await
            .map_err(|e| upstream_error(&upstream, "get the prompt", e))?;
        masked(&result)
    }
}
