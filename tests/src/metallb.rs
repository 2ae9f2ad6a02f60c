//! MetalLB's real controller (v0.16.1, built from its Go module by
//! scripts/tools.sh) against a test's kube-apiserver: its CRDs from its
//! module, the `metallb-system` namespace, address pools, and the
//! controller itself (webhooks off; no speakers: on a cluster without
//! nodes nothing announces the addresses, which are data here, never
//! connected to). It gives LoadBalancer Services their addresses, and says
//! why it cannot in an `AllocationFailed` event.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::k8s::{Cluster, free_port};
use crate::tools::{metallb_controller, metallb_crds, yaml_documents};

/// MetalLB's namespace, as its manifests name it.
pub const NAMESPACE: &str = "metallb-system";

/// The pools every test cluster gets: `public` (TEST-NET-1, given to any
/// LoadBalancer Service that asks for no pool) and `external-ips` (the
/// server's default external-IP range, given only when asked for by
/// address).
pub const DEFAULT_POOLS: [(&str, &str, bool); 2] = [("public", "192.0.2.0/24", true), ("external-ips", "127.43.0.0/16", false)];

/// The running controller, restarted when it exits (as its Deployment
/// would: it exits when the API server goes away for a while), killed on
/// drop.
pub struct Metallb {
    stop: Arc<AtomicBool>,
    child: Arc<Mutex<Child>>,
    keeper: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Drop for Metallb {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Ok(mut c) = self.child.lock() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(k) = self.keeper.take() {
            let _ = k.join();
        }
    }
}

/// How many times a test's controller is restarted at most.
const RESTARTS: usize = 200;

async fn applied(k: &Cluster, obj: &Value, plural: &str) {
    let (st, body) = k.apply(obj, plural, "metallb-install").await;
    assert!(st == 200 || st == 201, "{plural}: {st} {body:#}");
}

/// Adds (or replaces) address pool `name` of `cidr`.
pub async fn pool(k: &Cluster, name: &str, cidr: &str, auto_assign: bool) {
    let pool = json!({"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"addresses": [cidr], "autoAssign": auto_assign}});
    applied(k, &pool, "ipaddresspools").await;
}

impl Metallb {
    /// Installs MetalLB on `k` with `pools` (name, CIDR, auto-assigned) and
    /// starts its controller.
    pub async fn start(k: &Cluster, pools: &[(&str, &str, bool)]) -> Self {
        let mut names = Vec::new();
        for e in std::fs::read_dir(metallb_crds()).unwrap() {
            let crd = yaml_documents(&e.unwrap().path()).remove(0);
            names.push(k.install_crd(&crd).await);
        }
        for n in names {
            k.wait_established(&n).await;
        }
        k.namespace(NAMESPACE).await;
        // The controller reads its own pod (for owner references): it is
        // there as an object, scheduled nowhere.
        applied(
            k,
            &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "controller", "namespace": NAMESPACE}}),
            "serviceaccounts",
        )
        .await;
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "controller", "namespace": NAMESPACE},
            "spec": {"serviceAccountName": "controller", "automountServiceAccountToken": false,
                     "containers": [{"name": "controller", "image": "quay.io/metallb/controller:v0.16.1"}]}});
        applied(k, &pod, "pods").await;
        for (name, cidr, auto) in pools {
            pool(k, name, cidr, *auto).await;
        }
        let dir = tempfile::tempdir().unwrap();
        let spawn = controller(k.kubeconfig(), dir.path().join("controller.log"));
        let child = Arc::new(Mutex::new(spawn()));
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s) = (child.clone(), stop.clone());
        let keeper = std::thread::spawn(move || {
            let mut restarts = 0;
            while !s.load(Ordering::Relaxed) && restarts < RESTARTS {
                std::thread::sleep(Duration::from_millis(500));
                let Ok(mut child) = c.lock() else { return };
                if !s.load(Ordering::Relaxed) && matches!(child.try_wait(), Ok(Some(_))) {
                    *child = spawn();
                    restarts += 1;
                }
            }
        });
        Self { stop, child, keeper: Some(keeper), _dir: dir }
    }
}

/// What starts the controller against the cluster of `kubeconfig`, logging to `log`.
fn controller(kubeconfig: PathBuf, log: PathBuf) -> impl Fn() -> Child + Send + 'static {
    move || {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&log).unwrap();
        Command::new(metallb_controller())
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["--namespace", NAMESPACE, "--pod-name", "controller", "--webhook-mode", "disabled", "--disable-cert-rotation"])
            .args(["--port", &free_port().to_string(), "--health-probe-port", &free_port().to_string(), "--log-level", "warn"])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .expect("start MetalLB's controller")
    }
}
