//! The fake host's webhooks: [`FakeHost::validate`], [`FakeHost::default_object`] and
//! [`FakeHost::convert`] call the plugin as the host does, for the requests the API server would
//! send it by the plugin's declarations, checked by the host's rules (`wasmop_core::webhook`).

use serde_json::Value;

use super::host::{FakeHost, Plugin};
use crate::webhook::{Operation, WebhookType};
use crate::{Admission, Converter, Defaulter, Kind, Reconciler, Validator, Verdict};

impl FakeHost {
    /// Calls `R`'s [`Validator::validate`] (or [`Validator::validate_other`]) for `request`, as
    /// the host does for a validating webhook; its [`Context`](crate::Context) reads this host's
    /// objects. `Err` when the host would refuse `R`'s webhooks (see
    /// [`Config::webhook`](crate::Config::webhook)), or when `R` declares no validating webhook
    /// for the request's kind and operation: the API server would not call it.
    ///
    /// ```
    /// # use wasmop_guest::{Admission, Config, Context, Error, Kind, Outcome, Reconciler, Validator, Verdict, Webhook};
    /// use wasmop_guest::serde_json::{Value, json};
    /// use wasmop_guest::testing::FakeHost;
    /// # struct Page;
    /// # impl Reconciler for Page {
    /// #     type Primary = Value;
    /// #     fn config() -> Config { Config::new("page", Kind::namespaced("example.com", "v1", "Page")).webhook(Webhook::validating()) }
    /// #     fn reconcile(_: Value, _: &Context) -> Result<Outcome, Error> { Ok(Outcome::done()) }
    /// # }
    /// # impl Validator for Page {
    /// #     fn validate(_: &Admission<Value>, _: &Context) -> Verdict { Verdict::allow() }
    /// # }
    /// let page = json!({ "apiVersion": "example.com/v1", "kind": "Page", "metadata": { "name": "a" } });
    /// assert!(FakeHost::new().validate::<Page>(&Admission::create(&page)).unwrap().is_allowed());
    /// // The webhook is declared for creates and updates: a delete never reaches the plugin.
    /// assert!(FakeHost::new().validate::<Page>(&Admission::delete(&page)).is_err());
    /// ```
    pub fn validate<R: Validator>(&self, request: &Admission) -> Result<Verdict, String> {
        served::<R>(WebhookType::Validating, Some((&request.kind, request.operation)))?;
        let (ctx, _logs) = self.context(&Plugin::of::<R>(), 0, false);
        Ok(crate::validate::<R>(as_text(request), &ctx))
    }

    /// Calls `R`'s [`Defaulter::default`] (or [`Defaulter::default_other`]) for `request`, as
    /// the host does for a mutating webhook, and returns the object as the API server would
    /// store it; `Err` is the plugin's refusal, or why the host would not call it (as
    /// [`FakeHost::validate`] says).
    pub fn default_object<R: Defaulter>(&self, request: &Admission) -> Result<Value, String> {
        served::<R>(WebhookType::Mutating, Some((&request.kind, request.operation)))?;
        let (ctx, _logs) = self.context(&Plugin::of::<R>(), 0, false);
        let stored = crate::default_object::<R>(as_text(request), &ctx)?;
        Ok(serde_json::from_str(&stored).expect("the SDK gives JSON"))
    }

    /// Calls `R`'s [`Converter::convert`] for `objects`, as the host does for the conversion
    /// webhook of the primary's CRD, and returns them in `desired_api_version`; `Err` is the
    /// plugin's refusal, or why the host would not call it (no conversion webhook declared, or
    /// one the host refuses).
    pub fn convert<R: Converter>(&self, objects: &[Value], desired_api_version: &str) -> Result<Vec<Value>, String> {
        served::<R>(WebhookType::Conversion, None)?;
        let (ctx, _logs) = self.context(&Plugin::of::<R>(), 0, false);
        let objects = objects.iter().map(Value::to_string).collect();
        let converted = crate::convert::<R>(objects, desired_api_version, &ctx)?;
        Ok(converted.iter().map(|object| serde_json::from_str(object).expect("the SDK gives JSON")).collect())
    }
}

/// `request` with its objects as JSON text, as the host sends them.
fn as_text(request: &Admission) -> Admission<String> {
    let text = |object: &Option<Value>| object.as_ref().map(Value::to_string);
    Admission {
        object: text(&request.object),
        old_object: text(&request.old_object),
        uid: request.uid.clone(),
        kind: request.kind.clone(),
        operation: request.operation,
        namespace: request.namespace.clone(),
        name: request.name.clone(),
        username: request.username.clone(),
        groups: request.groups.clone(),
        dry_run: request.dry_run,
    }
}

/// Whether the host calls `R`'s webhook of `webhook_type` for a request of this kind and
/// operation (`None`: a conversion): `Err` says why not, or why the host would refuse `R`.
fn served<R: Reconciler>(webhook_type: WebhookType, request: Option<(&Kind, Operation)>) -> Result<(), String> {
    let config = R::config();
    let primary = config.primary.to_core();
    let declared: Vec<_> = config.webhooks.iter().map(crate::Webhook::to_core).collect();
    // Every webhook of the SDK's plugins has the admission export (`export!`).
    let checked = wasmop_core::webhook::declared(&config.name, &primary, &declared, true)
        .map_err(|refused| format!("the host refuses the plugin: {refused}"))?;
    let mut of_type = checked.iter().filter(|webhook| webhook.webhook_type == webhook_type);
    let called = match request {
        Some((kind, operation)) => of_type.any(|webhook| webhook.serves(&primary, &kind.to_core(), operation)),
        None => of_type.next().is_some(),
    };
    if called {
        return Ok(());
    }
    let what = match request {
        Some((kind, operation)) => format!(" for {operation:?} of {kind}"),
        None => String::new(),
    };
    Err(format!(
        "plugin {} declares no {} webhook{what}: the API server would not call it",
        config.name,
        webhook_type.name()
    ))
}
