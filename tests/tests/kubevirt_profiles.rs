//! Guest profiles on the kubevirt backend, against the real kube-apiserver
//! with strict field validation: a Windows-family VM is a KubeVirt VM with
//! EFI (Secure Boot, persistent NVRAM), SMM, a persistent TPM, Hyper-V
//! enlightenments and a clock in local time, as the API server keeps it;
//! and a VM that can be resized live has KubeVirt's `maxSockets` and
//! `maxGuest`.

use serde_json::json;
use vmaas_tests::kubevirt::{env, the_vm};
use vmaas_tests::vms::{self, publish};

const WINDOWS: &str = r#"
id: windows-ready
spec_defaults:
  image: test-guest
  memory: 512Mi
  disk_size: 1Gi
  guest_os_family: windows
"#;

const RESIZABLE: &str = r#"
id: resizable
spec_defaults:
  image: test-guest
  cpu_cores: 2
  memory: 512Mi
  disk_size: 1Gi
  max_cpu_cores: 4
  max_memory: 2Gi
"#;

const EFI_LINUX: &str = r#"
id: efi-linux
spec_defaults:
  image: test-guest
  memory: 512Mi
  disk_size: 1Gi
  firmware: efi
  tpm: true
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profiles_render_as_kubevirt_firmware_features_clock_and_tpm() {
    let (k, _kubevirt, s) = env().await;
    publish(&s, &format!("{WINDOWS}---{EFI_LINUX}---{RESIZABLE}"));
    let t = s.token("acme", false);

    let win = vms::create(&s, &t, "win", "windows-ready").await;
    vms::wait_ready(&s, &t, &win).await;
    let d = the_vm(&k, &win).await["spec"]["template"]["spec"]["domain"].clone();
    assert_eq!(d["firmware"], json!({"bootloader": {"efi": {"secureBoot": true, "persistent": true}}}), "{d:#}");
    assert_eq!(d["features"]["smm"], json!({"enabled": true}));
    assert_eq!(d["features"]["hyperv"]["spinlocks"], json!({"spinlocks": 8191}));
    assert_eq!(d["features"]["hyperv"]["synictimer"], json!({"enabled": true}));
    assert_eq!(d["devices"]["tpm"], json!({"persistent": true}));
    assert_eq!(d["clock"]["timezone"], "UTC");
    assert_eq!(d["clock"]["timer"]["rtc"], json!({"tickPolicy": "catchup"}));

    let efi = vms::create(&s, &t, "efi", "efi-linux").await;
    vms::wait_ready(&s, &t, &efi).await;
    let d = the_vm(&k, &efi).await["spec"]["template"]["spec"]["domain"].clone();
    assert_eq!(d["firmware"]["bootloader"]["efi"]["secureBoot"], false, "{d:#}");
    assert_eq!(d["devices"]["tpm"], json!({"persistent": true}));
    assert!(d.get("features").is_none() && d.get("clock").is_none(), "{d:#}");

    // Live resize limits: KubeVirt's LiveUpdate counts vCPUs in sockets.
    let big = vms::create(&s, &t, "big", "resizable").await;
    vms::wait_ready(&s, &t, &big).await;
    let d = the_vm(&k, &big).await["spec"]["template"]["spec"]["domain"].clone();
    assert_eq!(d["cpu"], json!({"cores": 1, "sockets": 2, "maxSockets": 4}), "{d:#}");
    assert_eq!(d["memory"], json!({"guest": "512Mi", "maxGuest": "2Gi"}));
}
