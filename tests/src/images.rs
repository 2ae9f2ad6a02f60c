//! Image imports through the API, for the tests that make them: an import
//! from a URL (or for an upload), and waiting until it settles.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::Server;
use crate::vms::V1;

/// The start of what a tenant is told of any refused or failed fetch.
pub const FETCH_FAILED: &str = "the image could not be fetched from its source";

/// Imports `name` with `spec` as tenant `t`; its id.
pub async fn import(s: &Server, t: &str, name: &str, spec: Value) -> String {
    crate::objects::created(s, t, "images", json!({"metadata": {"name": name}, "spec": spec})).await
}

/// Waits (at most 60 s) until image `id` is READY or FAILED; the image.
pub async fn settled(s: &Server, t: &str, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, v) = s.raw(Method::GET, &format!("{V1}/images/{id}"), Some(t), None).await;
        let state = v["object"]["status"]["state"].as_str().unwrap_or_default().to_owned();
        if state == "IMAGE_STATE_READY" || state == "IMAGE_STATE_FAILED" {
            return v["object"].clone();
        }
        assert!(Instant::now() < deadline, "image {id} never settled: {v}\n{}", s.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
