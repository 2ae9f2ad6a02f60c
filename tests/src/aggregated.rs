//! Played aggregated API servers (virt-api, cdi-apiserver): a router served
//! by the test process on a unix socket, made reachable to the real
//! kube-apiserver at [`AGGREGATED_ADDRESS`] inside its namespace (`socat`
//! terminates TLS there), and registered the way their operators install
//! them: a Service, an EndpointSlice (the test plays the endpoint
//! controller) and an `APIService` the aggregator reports available.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use axum::Router;
use reqwest::Method;
use serde_json::json;

use crate::k8s::{AGGREGATED_ADDRESS, Cluster, KubeApi};

/// One played aggregated API server.
pub struct Aggregated<'a> {
    /// Its Service's namespace and name (`kubevirt`, `virt-api`).
    pub namespace: &'a str,
    /// The Service's name.
    pub service: &'a str,
    /// The port it listens on at [`AGGREGATED_ADDRESS`].
    pub port: u16,
    /// The API group and version it serves.
    pub group: &'a str,
    /// The version.
    pub version: &'a str,
}

/// A self-signed certificate (not a CA: clients may trust it as it is)
/// and key for `cn` and `127.0.0.1`, in `dir`.
pub fn certificate(dir: &Path, cn: &str) -> (PathBuf, PathBuf) {
    let key = rcgen::KeyPair::generate().expect("a key pair");
    let mut params = rcgen::CertificateParams::new(vec![cn.to_owned(), "127.0.0.1".into()]).expect("certificate names");
    params.distinguished_name.push(rcgen::DnType::CommonName, cn);
    let cert = params.self_signed(&key).expect("a self-signed certificate");
    let (c, k) = (dir.join(format!("{cn}.crt")), dir.join(format!("{cn}.key")));
    std::fs::write(&c, cert.pem()).expect("write the certificate");
    std::fs::write(&k, key.serialize_pem()).expect("write the key");
    (c, k)
}

/// Serves `app` as aggregated server `a` of `cluster` (made by
/// [`Cluster::start_aggregated`]) and waits until the aggregator reports it
/// available.
pub async fn serve(cluster: &mut Cluster, a: &Aggregated<'_>, app: Router) {
    let d = cluster.dir().to_owned();
    let sock = d.join(format!("{}.sock", a.service));
    let (cert, key) = certificate(&d, &format!("{}.{}.svc", a.service, a.namespace));
    let netns = cluster.netns.as_ref().expect("an aggregated cluster (Cluster::start_aggregated)");
    let mut tls = netns.tls_to_unix(&format!("{AGGREGATED_ADDRESS}:{}", a.port), &cert, &key, &sock);
    let listener = tokio::net::UnixListener::bind(&sock).expect("the played server's socket");
    cluster.keep_task(tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    }));
    cluster.keep(&mut tls, &format!("socat-{}.log", a.service));
    register(&cluster.api(), a).await;
}

/// What the operator installs for `a`: its namespace, Service, EndpointSlice and APIService.
async fn register(k: &KubeApi, a: &Aggregated<'_>) {
    k.namespace(a.namespace).await;
    let apiservice = format!("{}.{}", a.version, a.group);
    let objects = [
        (
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": a.service, "namespace": a.namespace},
            "spec": {"ports": [{"port": 443, "targetPort": a.port, "protocol": "TCP"}]}}),
            "services",
        ),
        (
            json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": format!("{}-1", a.service), "namespace": a.namespace, "labels": {"kubernetes.io/service-name": a.service}},
            "addressType": "IPv4", "endpoints": [{"addresses": [AGGREGATED_ADDRESS], "conditions": {"ready": true}}],
            "ports": [{"port": a.port, "protocol": "TCP"}]}),
            "endpointslices",
        ),
        (
            json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": apiservice},
            "spec": {"group": a.group, "version": a.version, "service": {"namespace": a.namespace, "name": a.service, "port": 443},
                "insecureSkipTLSVerify": true, "groupPriorityMinimum": 1000, "versionPriority": 15}}),
            "apiservices",
        ),
    ];
    for (o, plural) in &objects {
        let (st, body) = k.apply(o, plural, "operator").await;
        assert!(st < 300, "{plural}: {st} {body}");
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, s) = k.request(Method::GET, &format!("/apis/apiregistration.k8s.io/v1/apiservices/{apiservice}"), None, None).await;
        let conditions = s["status"]["conditions"].as_array().cloned().unwrap_or_default();
        if conditions.iter().any(|c| c["type"] == "Available" && c["status"] == "True") {
            return;
        }
        assert!(Instant::now() < deadline, "{apiservice} not available to the aggregator: {s:#}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
