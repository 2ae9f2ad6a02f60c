//! Objects through the API, for the tests that make them: a create and
//! its answer, waiting on an object, and attaching a volume to a VM.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::Server;
use crate::vms::V1;

/// `POST {V1}/{path}` of `{"object": body}` as `t`: the status and the answer.
pub async fn post(s: &Server, t: &str, path: &str, body: Value) -> (u16, Value) {
    s.raw(Method::POST, &format!("{V1}/{path}"), Some(t), Some(json!({"object": body}))).await
}

/// Makes `body` at `path` as `t`, which must succeed (201); its id.
pub async fn created(s: &Server, t: &str, path: &str, body: Value) -> String {
    let (st, v) = post(s, t, path, body).await;
    assert_eq!(st, 201, "{v}");
    v["object"]["id"].as_str().unwrap().to_owned()
}

/// Polls `path` (at most 120 s) until `pred` holds on its object (or it is
/// gone, for `None`); the object then.
pub async fn wait_for(s: &Server, t: &str, path: &str, what: &str, pred: impl Fn(Option<&Value>) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (st, v) = s.raw(Method::GET, &format!("{V1}/{path}"), Some(t), None).await;
        let obj = (st == 200).then(|| &v["object"]);
        if pred(obj) {
            return v["object"].clone();
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}: {st} {v:#}\n{}", s.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// An object's `status.state` ("" for none).
pub fn state(v: Option<&Value>) -> &str {
    v.and_then(|v| v["status"]["state"].as_str()).unwrap_or("")
}

/// Attaches `volume` to `vm` as `name` and waits until the attachment is
/// READY; its id and the disk's serial.
pub async fn attach(s: &Server, t: &str, name: &str, volume: &str, vm: &str) -> (String, String) {
    let (st, a) =
        post(s, t, "volume_attachments", json!({"metadata": {"name": name}, "spec": {"volume": volume, "compute_instance": vm}})).await;
    assert_eq!(st, 201, "{a}");
    let id = a["object"]["id"].as_str().unwrap().to_owned();
    let serial = a["object"]["status"]["serial"].as_str().unwrap().to_owned();
    wait_for(s, t, &format!("volume_attachments/{id}"), "the attachment READY", |v| state(v) == "VOLUME_ATTACHMENT_STATE_READY").await;
    (id, serial)
}

/// Makes volume `name` of `size` as `t` and waits until it is READY; its
/// id and the file that holds its disk.
pub async fn ready_volume(s: &Server, t: &str, name: &str, size: &str) -> (String, std::path::PathBuf) {
    let vol = created(s, t, "volumes", json!({"metadata": {"name": name}, "spec": {"size": size}})).await;
    wait_for(s, t, &format!("volumes/{vol}"), "the volume READY", |v| state(v) == "VOLUME_STATE_READY").await;
    let file = s.data_dir.join("volumes").join(format!("{vol}.qcow2"));
    (vol, file)
}
