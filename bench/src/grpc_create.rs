//! A gRPC client of `osac.public.v1.ComputeInstances/Create`, typed by the
//! server's own generated messages (`vmaas_server::grpc::pb`).

use axum::http::uri::PathAndQuery;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Status};
use vmaas_server::grpc::pb::osac::public::v1 as pb;

const CREATE: &str = "/osac.public.v1.ComputeInstances/Create";

/// One HTTP/2 connection, and the caller's token.
pub struct Client {
    grpc: tonic::client::Grpc<Channel>,
    auth: MetadataValue<Ascii>,
}

impl Client {
    /// Connects to `url` as the holder of `token`.
    pub async fn connect(url: &str, token: &str) -> anyhow::Result<Self> {
        let channel = Endpoint::from_shared(url.to_owned())?.connect().await?;
        Ok(Self { grpc: tonic::client::Grpc::new(channel), auth: format!("Bearer {token}").parse()? })
    }

    /// Creates the compute instance `id` from `template`: the same object
    /// as the REST scenario's `{"object": {"id", "spec": {"template"}}}`.
    pub async fn create(&mut self, id: &str, template: &str) -> Result<pb::ComputeInstance, Status> {
        self.grpc.ready().await.map_err(|e| Status::unavailable(e.to_string()))?;
        let object = pb::ComputeInstance {
            id: id.to_owned(),
            spec: Some(pb::ComputeInstanceSpec {
                template: Some(pb::ComputeInstanceTemplateReference { name: template.to_owned(), ..Default::default() }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut req = Request::new(pb::ComputeInstancesCreateRequest { object: Some(object) });
        req.metadata_mut().insert("authorization", self.auth.clone());
        let codec = tonic_prost::ProstCodec::<pb::ComputeInstancesCreateRequest, pb::ComputeInstancesCreateResponse>::default();
        let answer = self.grpc.unary(req, PathAndQuery::from_static(CREATE), codec).await?.into_inner();
        answer.object.ok_or_else(|| Status::internal("a create answered no object"))
    }
}
