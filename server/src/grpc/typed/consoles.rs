//! `osac.public.v1.ConsoleSessions` and `ExternalIPPools`, typed: the two
//! services that are not a kind of the shared operations, each call one
//! call into the application layer.

use tonic::{Request, Response};
use vmaas_model::external_ip::{ExternalIpPool, IpFamily};

use super::Reply;
use super::meta::wire_enum;
use super::{Ctx, count, time};
use crate::app::consoles::{self, tickets::ConsoleType};
use crate::app::resources::external_ips::{pool, pools};
use crate::error::ApiError;
use crate::grpc::pb::osac::public::v1 as pb;

/// `osac.public.v1.ConsoleSessions`.
pub struct ConsoleSessions(pub Ctx);

#[tonic::async_trait]
impl pb::console_sessions_server::ConsoleSessions for ConsoleSessions {
    async fn create(&self, req: Request<pb::ConsoleSessionsCreateRequest>) -> Reply<pb::ConsoleSessionsCreateResponse> {
        let caller = self.0.caller(&req).await?;
        let asked = self.0.required(req.into_inner().object)?;
        let host = asked.resource_type == i32::from(pb::ConsoleResourceType::Host);
        let kind = if asked.r#type == i32::from(pb::ConsoleType::Vnc) { ConsoleType::Vnc } else { ConsoleType::Serial };
        let (id, issued) = consoles::session_of(&self.0.state, &caller, host, &asked.resource_id, kind, &asked.client_id)
            .await
            .map_err(|e| self.0.status(e))?;
        let kind = if kind == ConsoleType::Vnc { pb::ConsoleType::Vnc } else { pb::ConsoleType::Serial };
        let object = pb::ConsoleSession {
            resource_type: pb::ConsoleResourceType::ComputeInstance.into(),
            resource_id: id,
            r#type: kind.into(),
            client_id: asked.client_id,
            ticket: issued.ticket,
            expires_at: Some(time::to_pb(issued.expires_at)),
        };
        Ok(Response::new(pb::ConsoleSessionsCreateResponse { object: Some(object) }))
    }
}

/// `osac.public.v1.ExternalIPPools`: the pools the administrator
/// configured (`--external-ip-pool`), read-only.
pub struct ExternalIpPools(pub Ctx);

#[tonic::async_trait]
impl pb::external_ip_pools_server::ExternalIpPools for ExternalIpPools {
    async fn list(&self, req: Request<pb::ExternalIpPoolsListRequest>) -> Reply<pb::ExternalIpPoolsListResponse> {
        let caller = self.0.caller(&req).await?;
        let q = req.into_inner();
        for (field, given) in [("filter", &q.filter), ("order", &q.order)] {
            if given.as_ref().is_some_and(|v| !v.is_empty()) {
                let why = "is not offered on pools: there are a few, the default one first; list them all";
                return Err(self.0.status(ApiError::field(field, why)));
            }
        }
        let window = self.0.list_request(q.offset, q.limit, None, None)?;
        let all = pools(&self.0.state, &caller).await.map_err(|e| self.0.status(e))?;
        let total = count(all.len() as u64);
        let skip = usize::try_from(window.offset).unwrap_or(usize::MAX);
        let take = usize::try_from(window.limit).unwrap_or(usize::MAX);
        let items: Vec<_> = all.into_iter().skip(skip).take(take).map(pool_pb).collect();
        Ok(Response::new(pb::ExternalIpPoolsListResponse { size: count(items.len() as u64), total, items }))
    }

    async fn get(&self, req: Request<pb::ExternalIpPoolsGetRequest>) -> Reply<pb::ExternalIpPoolsGetResponse> {
        let caller = self.0.caller(&req).await?;
        let found = pool(&self.0.state, &caller, &req.get_ref().id).await.map_err(|e| self.0.status(e))?;
        Ok(Response::new(pb::ExternalIpPoolsGetResponse { object: Some(pool_pb(found)) }))
    }
}

fn pool_pb(p: ExternalIpPool) -> pb::ExternalIpPool {
    let family = match p.spec.ip_family {
        IpFamily::Unspecified => "IP_FAMILY_UNSPECIFIED",
        IpFamily::Ipv4 => "IP_FAMILY_IPV4",
        IpFamily::Ipv6 => "IP_FAMILY_IPV6",
    };
    pb::ExternalIpPool {
        id: p.id,
        metadata: Some(pb::Metadata { name: p.metadata.name, ..Default::default() }),
        spec: Some(pb::ExternalIpPoolSpec { ip_family: wire_enum(family, pb::IpFamily::from_str_name), cidrs: p.spec.cidrs }),
        status: Some(pb::ExternalIpPoolStatus { available: p.status.available }),
    }
}
