//! Crossplane's part, played against a real kube-apiserver ([`Cluster`]):
//! one reconcile of a composite resource through the real `function-vmaas`
//! over gRPC. Requirements are fetched until they settle (as Crossplane
//! does, at most five calls), then every desired composed resource is
//! applied the way Crossplane v2 applies it (server-side apply, the
//! `crossplane.io/composite` label, the composition-resource-name
//! annotation, a controller owner reference to the XR, a namespaced XR's
//! resources forced into its namespace and cluster-scoped ones refused),
//! resources no longer desired are deleted, and the XR's `resourceRefs` and
//! status (Crossplane's `Ready` and `Synced` plus the function's
//! conditions) are written: under `spec` for a LegacyCluster XR (the scope
//! with claims), under `spec.crossplane` for a v2 XR. For a claim it plays
//! the claim controller too, as `../shared/k8s/xcrd.py` has it
//! ([`crate::xcrd`]): the XR made for the claim (claim labels, the claim's
//! spec, `spec.claimRef`), the claim's `resourceRef`, and the XR's status
//! copied back to the claim with Crossplane's `Synced` and `Ready`.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use function_sdk_rust::proto::v1::function_runner_service_client::FunctionRunnerServiceClient;
use function_sdk_rust::proto::v1::resource_selector::Match;
use function_sdk_rust::proto::v1::{
    Ready, Resource, ResourceSelector, Resources, RunFunctionRequest, RunFunctionResponse, Severity, State, Status, Target,
};
use function_sdk_rust::resource::{json_to_struct, struct_to_json};
use reqwest::Method;
use serde_json::{Value, json};

use crate::k8s::Cluster;

/// Crossplane's label naming a composed resource's XR.
pub const COMPOSITE_LABEL: &str = "crossplane.io/composite";
/// Crossplane's label naming the claim of an XR or composed resource.
pub const CLAIM_NAME: &str = "crossplane.io/claim-name";
/// Crossplane's label naming the namespace of that claim.
pub const CLAIM_NAMESPACE: &str = "crossplane.io/claim-namespace";
/// Crossplane's annotation naming a composed resource in the pipeline.
pub const RESOURCE_NAME: &str = "crossplane.io/composition-resource-name";

/// A running `function-vmaas`, killed on drop.
pub struct FunctionProcess {
    child: Child,
    /// Its gRPC address.
    pub addr: String,
}

impl FunctionProcess {
    /// Starts the real binary on a free loopback port with `extra` flags
    /// (`--insecure`, or `--tls-certs-dir DIR`).
    pub fn start(extra: &[&str]) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let addr = format!("127.0.0.1:{port}");
        let child = Command::new(crate::bin("function-vmaas"))
            .args(["--address", &addr, "--metrics-address", ""])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start function-vmaas");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(&addr).is_err() {
            assert!(Instant::now() < deadline, "function-vmaas did not listen on {addr}");
            std::thread::sleep(Duration::from_millis(50));
        }
        Self { child, addr }
    }
}

impl Drop for FunctionProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What one reconcile did.
#[derive(Debug)]
pub struct Outcome {
    /// Fatal results: nothing was applied.
    pub fatal: Vec<String>,
    /// Warning results.
    pub warnings: Vec<String>,
    /// The composed resources now in the cluster, by pipeline name.
    pub composed: BTreeMap<String, Value>,
    /// The XR now in the cluster.
    pub xr: Value,
    /// The claim now in the cluster, for a claim.
    pub claim: Option<Value>,
}

impl Outcome {
    /// The condition `type` of the XR's status.
    pub fn condition(&self, kind: &str) -> Option<&Value> {
        self.xr["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == kind)
    }

    /// Whether Crossplane would call the XR ready.
    pub fn ready(&self) -> bool {
        self.condition("Ready").is_some_and(|c| c["status"] == "True")
    }
}

/// An API resource as discovery describes it.
#[derive(Debug, Clone)]
pub struct ApiResource {
    /// Its plural.
    pub plural: String,
    /// Whether its objects live in namespaces.
    pub namespaced: bool,
}

/// Plays Crossplane for XRs whose Composition runs `function-vmaas` with `input`.
pub struct Crossplane<'a> {
    k: &'a Cluster,
    addr: String,
    input: Value,
}

/// The XRDs, Compositions and example XRs of the shipped package.
pub fn compositions_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/compositions")
}

impl<'a> Crossplane<'a> {
    /// Crossplane for a Composition whose pipeline step has `input`.
    pub fn new(k: &'a Cluster, function: &FunctionProcess, input: Value) -> Self {
        Self { k, addr: format!("http://{}", function.addr), input }
    }

    /// The plural and scope of `apiVersion`/`kind`, from discovery.
    pub async fn discover(&self, api_version: &str, kind: &str) -> ApiResource {
        let path = if api_version.contains('/') { format!("/apis/{api_version}") } else { format!("/api/{api_version}") };
        let (st, list) = self.k.request(Method::GET, &path, None, None).await;
        assert_eq!(st, 200, "discovery of {api_version}: {list}");
        let r = list["resources"]
            .as_array()
            .and_then(|rs| rs.iter().find(|r| r["kind"] == kind && !r["name"].as_str().unwrap_or("/").contains('/')))
            .unwrap_or_else(|| panic!("{api_version} serves no {kind}"));
        ApiResource { plural: r["name"].as_str().unwrap().to_owned(), namespaced: r["namespaced"] == true }
    }

    async fn get(&self, obj: &Value) -> Option<Value> {
        let r = self.discover(obj["apiVersion"].as_str()?, obj["kind"].as_str()?).await;
        let (st, body) = self.k.request(Method::GET, &Cluster::path_of(obj, &r.plural), None, None).await;
        (st == 200).then_some(body)
    }

    /// What a selector of the function's requirements matches.
    async fn fetch(&self, s: &ResourceSelector) -> Vec<Value> {
        let r = self.discover(&s.api_version, &s.kind).await;
        let mut stub = json!({"apiVersion": s.api_version, "kind": s.kind, "metadata": {}});
        if let Some(ns) = s.namespace.as_ref().filter(|_| r.namespaced) {
            stub["metadata"]["namespace"] = json!(ns);
        }
        match &s.r#match {
            Some(Match::MatchName(n)) => {
                stub["metadata"]["name"] = json!(n);
                let (st, body) = self.k.request(Method::GET, &Cluster::path_of(&stub, &r.plural), None, None).await;
                if st == 200 { vec![body] } else { vec![] }
            }
            Some(Match::MatchLabels(l)) => {
                let selector: Vec<String> = l.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let path = format!("{}?labelSelector={}", Cluster::path_of(&stub, &r.plural), selector.join(","));
                self.list(&path, s).await
            }
            None => self.list(&Cluster::path_of(&stub, &r.plural), s).await,
        }
    }

    /// The items of a list, each with its `apiVersion` and `kind` (which a
    /// list answers without), as Crossplane hands them to a function.
    async fn list(&self, path: &str, s: &ResourceSelector) -> Vec<Value> {
        let (_, body) = self.k.request(Method::GET, path, None, None).await;
        let items = body["items"].as_array().cloned().unwrap_or_default();
        items
            .into_iter()
            .map(|mut i| {
                i["apiVersion"] = json!(s.api_version);
                i["kind"] = json!(s.kind);
                i
            })
            .collect()
    }

    fn resource(obj: &Value) -> Resource {
        Resource { resource: obj.as_object().map(json_to_struct), ..Default::default() }
    }

    /// Calls the function until its requirements settle (at most five calls).
    async fn run_pipeline(&self, xr: &Value, observed: &BTreeMap<String, Value>) -> RunFunctionResponse {
        let mut client = FunctionRunnerServiceClient::connect(self.addr.clone()).await.expect("connect to function-vmaas");
        let mut required: HashMap<String, Resources> = HashMap::new();
        let mut asked: Option<HashMap<String, ResourceSelector>> = None;
        for _ in 0..5 {
            let req = RunFunctionRequest {
                observed: Some(State {
                    composite: Some(Self::resource(xr)),
                    resources: observed.iter().map(|(k, v)| (k.clone(), Self::resource(v))).collect(),
                }),
                desired: Some(State { composite: Some(Resource::default()), resources: HashMap::new() }),
                input: self.input.as_object().map(json_to_struct),
                required_resources: required.clone(),
                ..Default::default()
            };
            let rsp = client.run_function(req).await.expect("RunFunction").into_inner();
            let now = rsp.requirements.as_ref().map(|r| r.resources.clone()).unwrap_or_default();
            if asked.as_ref() == Some(&now) || now.is_empty() {
                return rsp;
            }
            required.clear();
            for (name, sel) in &now {
                let items = self.fetch(sel).await.iter().map(Self::resource).collect();
                required.insert(name.clone(), Resources { items });
            }
            asked = Some(now);
        }
        panic!("the function's requirements did not settle in five calls");
    }

    /// The composed resources of `xr` now in the cluster, by pipeline name.
    async fn observed(&self, xr: &Value) -> BTreeMap<String, Value> {
        let mut out = BTreeMap::new();
        let refs = xr["spec"].get("resourceRefs").unwrap_or(&xr["spec"]["crossplane"]["resourceRefs"]);
        for r in refs.as_array().cloned().unwrap_or_default() {
            let mut stub = json!({"apiVersion": r["apiVersion"], "kind": r["kind"], "metadata": {"name": r["name"]}});
            let ns = r["namespace"].as_str().or(xr["metadata"]["namespace"].as_str());
            let scope = self.discover(r["apiVersion"].as_str().unwrap(), r["kind"].as_str().unwrap()).await;
            if let Some(ns) = ns.filter(|_| scope.namespaced) {
                stub["metadata"]["namespace"] = json!(ns);
            }
            if let Some(obj) = self.get(&stub).await {
                let key = obj["metadata"]["annotations"][RESOURCE_NAME].as_str().unwrap_or_default().to_owned();
                out.insert(key, obj);
            }
        }
        out
    }

    /// Makes `desired` a composed resource of `xr`, as Crossplane v2 does.
    async fn compose(&self, xr: &Value, key: &str, mut desired: Value) -> Value {
        let api = desired["apiVersion"].as_str().unwrap().to_owned();
        let scope = self.discover(&api, desired["kind"].as_str().unwrap()).await;
        if let Some(ns) = xr["metadata"]["namespace"].as_str() {
            assert!(scope.namespaced, "a namespaced XR cannot compose the cluster-scoped {key}: {desired:#}");
            let asked = desired["metadata"]["namespace"].as_str().unwrap_or(ns);
            assert_eq!(asked, ns, "{key} is put in another namespace than its XR's");
            desired["metadata"]["namespace"] = json!(ns);
        }
        let meta = &mut desired["metadata"];
        let labels = &xr["metadata"]["labels"];
        meta["labels"][COMPOSITE_LABEL] = labels.get(COMPOSITE_LABEL).unwrap_or(&xr["metadata"]["name"]).clone();
        // The claim's labels, from the XR's (or its claimRef).
        let claim = &xr["spec"]["claimRef"];
        let (claim_ns, claim_name) = match (labels[CLAIM_NAMESPACE].as_str(), labels[CLAIM_NAME].as_str()) {
            (Some(ns), Some(n)) if !ns.is_empty() && !n.is_empty() => (json!(ns), json!(n)),
            _ => (claim["namespace"].clone(), claim["name"].clone()),
        };
        if claim_ns.is_string() && claim_name.is_string() {
            meta["labels"][CLAIM_NAMESPACE] = claim_ns;
            meta["labels"][CLAIM_NAME] = claim_name;
        }
        meta["annotations"][RESOURCE_NAME] = json!(key);
        meta["ownerReferences"] = json!([{
            "apiVersion": xr["apiVersion"], "kind": xr["kind"], "name": xr["metadata"]["name"],
            "uid": xr["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true,
        }]);
        let (st, body) = self.k.apply(&desired, &scope.plural, "apiextensions.crossplane.io/composed").await;
        assert!(st == 200 || st == 201, "the API server refuses composed resource {key}: {st} {body:#}");
        body
    }

    /// One reconcile of the XR `xr` (as stored) of resource `plural`.
    pub async fn reconcile(&self, plural: &str, xr: &Value) -> Outcome {
        let (st, xr) = self.k.request(Method::GET, &Cluster::path_of(xr, plural), None, None).await;
        assert_eq!(st, 200, "the XR: {xr}");
        let observed = self.observed(&xr).await;
        let rsp = self.run_pipeline(&xr, &observed).await;
        let of = |s: Severity| rsp.results.iter().filter(|r| r.severity == s as i32).map(|r| r.message.clone()).collect::<Vec<_>>();
        let (fatal, warnings) = (of(Severity::Fatal), of(Severity::Warning));
        if !fatal.is_empty() {
            return Outcome { fatal, warnings, composed: observed, xr, claim: None };
        }
        let desired = rsp.desired.clone().unwrap_or_default();
        let mut composed = BTreeMap::new();
        let mut unready = Vec::new();
        // Namespaces first: Crossplane would fail the reconcile that applies
        // an object before its namespace exists and succeed on the next one;
        // applying them first gets there in one.
        let mut order: Vec<(&String, &Resource)> = desired.resources.iter().collect();
        order.sort_by_key(|(_, r)| r.resource.as_ref().map(struct_to_json).is_none_or(|o| o["kind"] != "Namespace"));
        for (key, r) in order {
            let obj = r.resource.as_ref().map(struct_to_json).unwrap_or(Value::Null);
            composed.insert(key.clone(), self.compose(&xr, key, obj).await);
            if r.ready != Ready::True as i32 {
                unready.push(key.clone());
            }
        }
        for (key, obj) in &observed {
            if !composed.contains_key(key) {
                let scope = self.discover(obj["apiVersion"].as_str().unwrap(), obj["kind"].as_str().unwrap()).await;
                self.k.request(Method::DELETE, &Cluster::path_of(obj, &scope.plural), None, None).await;
            }
        }
        let xr = self.write_refs(plural, &xr, &composed).await;
        let status = desired.composite.as_ref().and_then(|c| c.resource.as_ref()).map(struct_to_json);
        let xr = self.write_status(plural, &xr, status, &rsp, &unready).await;
        Outcome { fatal, warnings, composed, xr, claim: None }
    }

    /// One reconcile of the claim `claim` (as stored) of resource `plural`:
    /// its XR (of resource `xr_plural`) made or updated from it, reconciled,
    /// and its status copied back to the claim.
    pub async fn reconcile_claim(&self, plural: &str, xr_plural: &str, claim: &Value) -> Outcome {
        let (st, claim) = self.k.request(Method::GET, &Cluster::path_of(claim, plural), None, None).await;
        assert_eq!(st, 200, "the claim: {claim}");
        let name = match claim["spec"]["resourceRef"]["name"].as_str() {
            Some(xr) => xr.to_owned(),
            None => generated_name(claim["metadata"]["name"].as_str().unwrap_or_default()),
        };
        let xr = crate::xcrd::xr_for_claim(&claim, &name);
        let xr = {
            let (st, body) = self.k.apply(&xr, xr_plural, "apiextensions.crossplane.io/claim").await;
            assert!(st == 200 || st == 201, "the XR of a claim is refused: {st} {body:#}");
            body
        };
        let mut reference = json!({"apiVersion": claim["apiVersion"], "kind": claim["kind"],
            "metadata": {"name": claim["metadata"]["name"], "namespace": claim["metadata"]["namespace"]},
            "spec": {"resourceRef": {"apiVersion": xr["apiVersion"], "kind": xr["kind"], "name": xr["metadata"]["name"]}}});
        let (st, body) = self.k.apply(&reference, plural, "apiextensions.crossplane.io/claim").await;
        assert_eq!(st, 200, "the claim's resourceRef: {body:#}");
        let mut outcome = self.reconcile(xr_plural, &xr).await;
        let status = claim_status_of(&claim, &outcome.xr);
        reference.as_object_mut().map(|o| o.remove("spec"));
        let (st, claim) = self.k.write_status(&reference, plural, status).await;
        assert_eq!(st, 200, "the API server refuses the claim's status: {claim:#}");
        outcome.claim = Some(claim);
        outcome
    }

    /// Deletes the claim `claim` (as stored) of resource `plural`, its XR
    /// (of `xr_plural`) and what that composed, as Crossplane does, unless
    /// a `ClusterUsage` names the XR as used: then Crossplane's usage
    /// webhook refuses, and so does this, with its reason.
    pub async fn delete_claim(&self, plural: &str, xr_plural: &str, claim: &Value) -> Result<(), String> {
        let (st, claim) = self.k.request(Method::GET, &Cluster::path_of(claim, plural), None, None).await;
        assert_eq!(st, 200, "the claim: {claim}");
        let r = &claim["spec"]["resourceRef"];
        let stub = json!({"apiVersion": r["apiVersion"], "kind": r["kind"], "metadata": {"name": r["name"]}});
        let (st, xr) = self.k.request(Method::GET, &Cluster::path_of(&stub, xr_plural), None, None).await;
        assert_eq!(st, 200, "the claim's XR: {xr}");
        let (st, usages) = self.k.request(Method::GET, "/apis/protection.crossplane.io/v1beta1/clusterusages", None, None).await;
        assert_eq!(st, 200, "{usages}");
        let users: Vec<String> = usages["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|u| u["spec"]["of"]["kind"] == xr["kind"] && u["spec"]["of"]["resourceRef"]["name"] == xr["metadata"]["name"])
            .map(|u| {
                format!(
                    "{}/{}",
                    u["spec"]["by"]["kind"].as_str().unwrap_or("?"),
                    u["spec"]["by"]["resourceRef"]["name"].as_str().unwrap_or("?")
                )
            })
            .collect();
        if !users.is_empty() {
            return Err(format!("This resource is in-use by {} usage(s), by resource(s) {}", users.len(), users.join(", ")));
        }
        for obj in self.observed(&xr).await.values() {
            let scope = self.discover(obj["apiVersion"].as_str().unwrap(), obj["kind"].as_str().unwrap()).await;
            self.k.request(Method::DELETE, &Cluster::path_of(obj, &scope.plural), None, None).await;
        }
        self.k.request(Method::DELETE, &Cluster::path_of(&xr, xr_plural), None, None).await;
        let (st, body) = self.k.request(Method::DELETE, &Cluster::path_of(&claim, plural), None, None).await;
        assert_eq!(st, 200, "deleting the claim: {body}");
        Ok(())
    }

    /// Whether the XRs of `plural` (the resource of `xr`) are LegacyCluster
    /// XRs, from the CRD the API server serves for them.
    async fn legacy(&self, plural: &str, xr: &Value) -> bool {
        let group = xr["apiVersion"].as_str().and_then(|a| a.split_once('/')).map(|(g, _)| g).unwrap_or_default();
        let path = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.{group}");
        let (st, crd) = self.k.request(Method::GET, &path, None, None).await;
        assert_eq!(st, 200, "the CRD of {plural}: {crd}");
        crate::xcrd::legacy(&crd)
    }

    /// Records the composed resources in the XR's `resourceRefs`: under
    /// `spec` for a LegacyCluster XR, under `spec.crossplane` for a v2 one.
    async fn write_refs(&self, plural: &str, xr: &Value, composed: &BTreeMap<String, Value>) -> Value {
        let namespaced = xr["metadata"]["namespace"].is_string();
        let refs: Vec<Value> = composed
            .values()
            .map(|o| {
                let mut r = json!({"apiVersion": o["apiVersion"], "kind": o["kind"], "name": o["metadata"]["name"]});
                if let (false, Some(ns)) = (namespaced, o["metadata"]["namespace"].as_str()) {
                    r["namespace"] = json!(ns);
                }
                r
            })
            .collect();
        let spec =
            if self.legacy(plural, xr).await { json!({"resourceRefs": refs}) } else { json!({"crossplane": {"resourceRefs": refs}}) };
        let mut patch =
            json!({"apiVersion": xr["apiVersion"], "kind": xr["kind"], "metadata": {"name": xr["metadata"]["name"]}, "spec": spec});
        if namespaced {
            patch["metadata"]["namespace"] = xr["metadata"]["namespace"].clone();
        }
        let (st, body) = self.k.apply(&patch, plural, "apiextensions.crossplane.io/composite").await;
        assert_eq!(st, 200, "writing the XR's resourceRefs: {body:#}");
        body
    }

    /// Writes the XR's status: the function's fields, Crossplane's `Ready`
    /// and `Synced`, and the function's conditions.
    async fn write_status(&self, plural: &str, xr: &Value, status: Option<Value>, rsp: &RunFunctionResponse, unready: &[String]) -> Value {
        let now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
        let mut status = status.and_then(|s| s.get("status").cloned()).unwrap_or_else(|| json!({}));
        let mut conditions = vec![
            json!({"type": "Synced", "status": "True", "reason": "ReconcileSuccess", "lastTransitionTime": now}),
            if unready.is_empty() {
                json!({"type": "Ready", "status": "True", "reason": "Available", "lastTransitionTime": now})
            } else {
                json!({"type": "Ready", "status": "False", "reason": "Creating", "lastTransitionTime": now,
                    "message": format!("Unready resources: {}", stable_n_and_some_more(unready))})
            },
        ];
        for c in &rsp.conditions {
            let state = if c.status == Status::ConditionTrue as i32 {
                "True"
            } else if c.status == Status::ConditionFalse as i32 {
                "False"
            } else {
                "Unknown"
            };
            let mut v = json!({"type": c.r#type, "status": state, "reason": c.reason, "lastTransitionTime": now});
            if let Some(m) = &c.message {
                v["message"] = json!(m);
            }
            conditions.push(v);
        }
        status["conditions"] = json!(conditions);
        // Conditions addressed to the claim too: Crossplane lists their
        // types in `claimConditionTypes`, and the claim copies them.
        let for_claim: Vec<&str> =
            rsp.conditions.iter().filter(|c| c.target == Some(Target::CompositeAndClaim as i32)).map(|c| c.r#type.as_str()).collect();
        if xr["spec"]["claimRef"].is_object() && !for_claim.is_empty() {
            status["claimConditionTypes"] = json!(for_claim);
        }
        let (st, body) = self.k.write_status(xr, plural, status).await;
        assert_eq!(st, 200, "the API server refuses the XR status: {body:#}");
        body
    }
}

/// The names of `names`, sorted, as Crossplane lists them in a condition's
/// message: the first three, then how many more (`a, b, and c`; `a, b, c,
/// and 2 more`).
fn stable_n_and_some_more(names: &[String]) -> String {
    const N: usize = 3;
    let mut sorted = names.to_vec();
    sorted.sort();
    match sorted.len() {
        n if n > N => format!("{}, and {} more", sorted[..N].join(", "), n - N),
        N => format!("{}, and {}", sorted[..N - 1].join(", "), sorted[N - 1]),
        _ => sorted.join(", "),
    }
}

/// The name the claim controller's `generateName` gives the XR of the
/// claim named `claim`: the name cut to 58 characters, a dash, then five
/// random characters (Kubernetes' SimpleNameGenerator).
fn generated_name(claim: &str) -> String {
    let base = format!("{claim}-");
    let base: String = base.chars().take(58).collect();
    let alphabet: Vec<char> = "bcdfghjklmnpqrstvwxz2456789".chars().collect();
    let random = uuid::Uuid::new_v4();
    let suffix: String = random.as_bytes().iter().take(5).map(|b| alphabet[usize::from(*b) % alphabet.len()]).collect();
    format!("{base}{suffix}")
}

/// The claim's status after the claim controller synced it from `xr`
/// (`xcrd.claim_status`), with the conditions Crossplane's claim
/// reconciler sets: `Synced`, the XR's conditions named in its
/// `claimConditionTypes`, and `Ready` as its XR's (`Waiting` until then).
fn claim_status_of(claim: &Value, xr: &Value) -> Value {
    let mut status = crate::xcrd::claim_status(claim, xr);
    let of_xr = |t: &str| xr["status"]["conditions"].as_array().and_then(|cs| cs.iter().find(|c| c["type"] == t)).cloned();
    let now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let mut conditions = vec![json!({"type": "Synced", "status": "True", "reason": "ReconcileSuccess", "lastTransitionTime": now})];
    for t in xr["status"]["claimConditionTypes"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        conditions.extend(of_xr(t));
    }
    conditions.push(match of_xr("Ready") {
        Some(c) if c["status"] == "True" => json!({"type": "Ready", "status": "True", "reason": "Available", "lastTransitionTime": now}),
        _ => json!({"type": "Ready", "status": "False", "reason": "Waiting",
            "message": "Claim is waiting for composite resource to become Ready", "lastTransitionTime": now}),
    });
    status["conditions"] = json!(conditions);
    status
}
