//! `Events.Watch` of `events.v1` and `osac.public.v1`: the event log as a
//! gRPC server stream, with the same tenancy, filter and resume rules as the
//! Server-Sent Events route. The public stream shows VMs as compute
//! instances and templates as compute instance templates; events of kinds a
//! stream's `Event` has no field for are not sent.

use std::pin::Pin;

use futures::{Stream, StreamExt};
use prost_reflect::{DescriptorPool, DynamicMessage, Kind, MessageDescriptor, MethodDescriptor, Value as Field};
use serde_json::Value;
use tonic::Status;
use vmaas_model::template::view::to_compute_instance_template;
use vmaas_model::vm::compute_instance::to_compute_instance;

use super::{json, status};
use crate::app::events::{self, Followed};
use crate::error::ApiError;
use crate::events::{Audience, Published};
use crate::serve::conns::ConnMark;
use crate::state::AppState;

/// The responses of a watch.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<DynamicMessage, Status>> + Send>>;

/// Starts a watch for the caller `req` authenticates.
pub async fn watch(
    pool: DescriptorPool,
    state: AppState,
    method: MethodDescriptor,
    req: tonic::Request<DynamicMessage>,
) -> Result<tonic::Response<EventStream>, Status> {
    let failed = |e: ApiError| status::from_api(&pool, e);
    let auth = req.metadata().get("authorization").map(|v| v.as_bytes());
    let caller = state.keys.bearer(auth).await.map_err(failed)?;
    if let Some(rate) = state.rate.as_deref() {
        rate.check(&caller.tenant).map_err(|l| failed(l.into()))?;
    }
    let conn = req.extensions().get::<ConnMark>();
    let slot = crate::watches::start(&state.watches, &caller.tenant, auth, conn).map_err(failed)?;
    let msg = req.get_ref();
    let text = |name: &str| msg.get_field_by_name(name).and_then(|v| v.as_str().map(str::to_owned)).filter(|s| !s.trim().is_empty());
    let audience = Audience::new(caller, text("filter").as_deref()).map_err(failed)?;
    let after = text("after").or_else(|| req.metadata().get("last-event-id").and_then(|v| v.to_str().ok()).map(str::to_owned));
    let after = after
        .map(|a| a.trim().parse::<i64>().map_err(|_| Status::invalid_argument(format!("after: {a:?} is not an event id"))))
        .transpose()?;
    let response = method.output();
    let event = match response.get_field_by_name("event").map(|f| f.kind()) {
        Some(Kind::Message(m)) => m,
        _ => return Err(Status::internal("the watch response has no event")),
    };
    let log = events::watch(&state, after, slot).await.map_err(failed)?;
    let view = View { response, event, audience };
    let stream = log.filter_map(move |f| {
        futures::future::ready(match f {
            Followed::Event(e) => view.render(&e),
            Followed::Displaced => {
                let why = "the server holds as many event streams as it may: this one, the oldest of the tenant holding the most, ended to make room; watch again";
                Some(Err(Status::resource_exhausted(why)))
            }
            // The status ends the stream.
            Followed::Failed(err) => Some(Err(Status::unavailable(format!("the event log cannot be read: {err}")))),
        })
    });
    Ok(tonic::Response::new(Box::pin(stream)))
}

/// How one stream shows events.
struct View {
    response: MessageDescriptor,
    event: MessageDescriptor,
    audience: Audience,
}

impl View {
    /// The response for `e`, if this stream sends it.
    fn render(&self, e: &Published) -> Option<Result<DynamicMessage, Status>> {
        let value = self.in_view(&e.value)?;
        if !self.audience.sees(&e.row.tenant, &value) {
            return None;
        }
        Some(json::from_rest(self.event.clone(), value).map(|event| {
            let mut out = DynamicMessage::new(self.response.clone());
            out.set_field_by_name("event", Field::Message(event));
            out
        }))
    }

    /// The event as this stream's `Event` has it, if it has a field for its kind.
    fn in_view(&self, event: &Value) -> Option<Value> {
        let mut event = event.clone();
        let m = event.as_object_mut()?;
        if self.event.package_name() == "osac.public.v1" {
            if let Some(vm) = m.remove("virtual_machine") {
                // Events name what a VM refers to by what it holds (ids).
                m.insert("compute_instance".into(), to_compute_instance(vm, &Default::default()));
            }
            if let Some(t) = m.remove("virtual_machine_template") {
                m.insert("compute_instance_template".into(), to_compute_instance_template(t));
            }
        }
        let declared = m.keys().any(|k| k != "id" && k != "type" && self.event.get_field_by_name(k).is_some());
        declared.then_some(event)
    }
}
