//! Guest profiles on the qemu backend, with real guests: a template asking
//! for EFI, Secure Boot and a TPM boots the test guest from its EFI system
//! partition (Debian's signed shim, GRUB and kernel under OVMF's Secure
//! Boot build), and the guest sees EFI, Secure Boot on and a TPM. What it
//! writes to its TPM (an NV index) and to an EFI variable is still there
//! after a stop and start and after the server is killed and restarted.
//! An EFI guest without a TPM starts from its template's snapshot, with a
//! variable store of its own; a TPM guest boots cold and says why.

use reqwest::Method;
use serde_json::json;
use vmaas_tests::vms::{V1, boot_of, console, create, publish, said, state, wait_until};
use vmaas_tests::{Server, qemu_pids};

const EFI: &str = r#"
id: efi
title: EFI guest
parameters:
  - { name: vm_memory, type: quantity, default: { value: 512Mi } }
spec_defaults:
  image: test-guest-efi
  disk_size: 256Mi
  firmware: efi
  secure_boot: true
  tpm: true
"#;

/// What both templates end with: port 80 exposed, and READY once it answers.
const SERVED: &str = r#"
  exposed_ports:
    - { port: 80, protocol: tcp, name: http }
  readiness_probe:
    http: { port: 80, path: / }
    period_seconds: 1
    timeout_seconds: 240
"#;

/// The EFI variables' GUID this test writes under (made up for it).
const GUID: &str = "5e1ec7ed-0000-4000-8000-00000000beef";
/// EFI's global variables' GUID (`SecureBoot` is one).
const GLOBAL: &str = "8be4df61-93ca-11d2-aa0d-00e098032b8c";

/// The guest's platform as it sees it, and what it kept: EFI, Secure Boot,
/// the TPM, the TPM's value and the EFI variable's.
fn platform_seen(s: &Server, t: &str, vm: &str) -> String {
    let cmd = format!(
        "efi=no; [ -d /sys/firmware/efi ] && efi=yes; \
         sb=$(tail -c +5 /sys/firmware/efi/efivars/SecureBoot-{GLOBAL} 2>/dev/null | od -An -tu1 | tr -d ' '); \
         tpm=no; [ -e /sys/class/tpm/tpm0 ] && tpm=yes; \
         v=$(tail -c +5 /sys/firmware/efi/efivars/VmaasTest-{GUID} 2>/dev/null); \
         n=$(vmaas-tpm read 2>&1 | tail -n1); \
         echo \"<<efi=$efi sb=$sb tpm=$tpm var=$v nv=$n>>\""
    );
    said(&console(s, t, vm, &cmd))
}

async fn ready(s: &Server, t: &str, id: &str) -> serde_json::Value {
    wait_until(s, t, id, "READY", 300, |v| state(v) == "VIRTUAL_MACHINE_STATE_READY").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_efi_secure_boot_guest_with_a_tpm_keeps_its_variables_and_tpm_across_stops_and_server_kills() {
    let mut s = Server::start_qemu().await;
    publish(&s, &format!("{}{}", EFI.trim_end(), SERVED));
    let t = s.token("acme", false);
    let id = create(&s, &t, "vault", "efi").await;
    let vm = ready(&s, &t, &id).await;
    assert!(boot_of(&vm).ends_with("(cold boot: it has a TPM, whose identity would be its template's)"), "{}", boot_of(&vm));
    let dir = s.data_dir.join("vms").join(&id);
    assert!(dir.join("efi-vars.fd").is_file() && dir.join("tpm").is_dir(), "the VM's EFI variables and TPM state are in its directory");
    assert_eq!(swtpms(&dir), 1, "one swtpm runs for the VM");

    assert_eq!(platform_seen(&s, &t, "vault"), "efi=yes sb=1 tpm=yes var= nv=TPM-ERROR read rc=0000018b", "a fresh guest's platform");
    let write = format!(
        "printf '\\x07\\x00\\x00\\x00kept-in-nvram' > /sys/firmware/efi/efivars/VmaasTest-{GUID} && vmaas-tpm write kept-in-tpm | tail -n1 | sed 's/.*/<<&>>/'"
    );
    assert_eq!(said(&console(&s, &t, "vault", &write)), "TPM-OK wrote kept-in-tpm");
    let kept = "efi=yes sb=1 tpm=yes var=kept-in-nvram nv=TPM-OK value=kept-in-tpm";
    assert_eq!(platform_seen(&s, &t, "vault"), kept);

    // Stop and start: a new QEMU and a new swtpm, the same variable store and TPM state.
    let patch = |state: &'static str| json!({"object": {"spec": {"state": state}}});
    let path = format!("{V1}/virtual_machines/{id}");
    let (st, b) = s.raw(Method::PATCH, &path, Some(&t), Some(patch("stopped"))).await;
    assert_eq!(st, 200, "{b}");
    wait_until(&s, &t, &id, "STOPPED", 120, |v| state(v) == "VIRTUAL_MACHINE_STATE_STOPPED").await;
    let (st, b) = s.raw(Method::PATCH, &path, Some(&t), Some(patch("started"))).await;
    assert_eq!(st, 200, "{b}");
    ready(&s, &t, &id).await;
    assert_eq!(platform_seen(&s, &t, "vault"), kept, "after a stop and start");

    // The server killed: the guest runs on, with its TPM, and the restarted server adopts it.
    s.kill9().await;
    s.relaunch().await;
    ready(&s, &t, &id).await;
    assert_eq!(platform_seen(&s, &t, "vault"), kept, "after the server was killed and restarted");

    // A live migration: the new QEMU's swtpm takes the TPM's state, its firmware the same store.
    let boot_id = said(&console(&s, &t, "vault", "echo \"<<$(cat /proc/sys/kernel/random/boot_id)>>\""));
    let old = qemu_pids(&id);
    let admin = s.token("ops", true);
    let (st, b) = s.raw(Method::POST, &format!("{path}/migrate"), Some(&admin), Some(json!({}))).await;
    assert_eq!(st, 202, "{b}");
    wait_until(&s, &t, &id, "READY on a new QEMU", 180, |v| state(v) == "VIRTUAL_MACHINE_STATE_READY" && qemu_pids(&id) != old).await;
    assert_eq!(said(&console(&s, &t, "vault", "echo \"<<$(cat /proc/sys/kernel/random/boot_id)>>\"")), boot_id, "the same boot");
    let moved = "efi=yes sb=1 tpm=yes var=kept-in-nvram nv=TPM-OK value=moved-with-the-guest";
    assert_eq!(
        said(&console(&s, &t, "vault", "vmaas-tpm write moved-with-the-guest | tail -n1 | sed 's/.*/<<&>>/'")),
        "TPM-OK wrote moved-with-the-guest"
    );
    assert_eq!(platform_seen(&s, &t, "vault"), moved, "after a live migration, the TPM takes writes");
    assert_eq!(swtpms(&dir), 1, "one swtpm runs for the VM after the migration");
    assert!(dir.join("tpm-b").is_dir() && !dir.join("tpm").exists(), "the new swtpm's state replaced the old one's");

    // And its state is on disk: a stop and start after the migration finds it.
    let (st, b) = s.raw(Method::PATCH, &path, Some(&t), Some(patch("stopped"))).await;
    assert_eq!(st, 200, "{b}");
    wait_until(&s, &t, &id, "STOPPED", 120, |v| state(v) == "VIRTUAL_MACHINE_STATE_STOPPED").await;
    assert_eq!(swtpms(&dir), 0, "the swtpm ends with its QEMU");
    let (st, b) = s.raw(Method::PATCH, &path, Some(&t), Some(patch("started"))).await;
    assert_eq!(st, 200, "{b}");
    ready(&s, &t, &id).await;
    assert_eq!(platform_seen(&s, &t, "vault"), moved, "after the migration and a stop and start");

    // Deleted: its QEMU, its swtpm and its directory are gone.
    let (st, b) = s.raw(Method::DELETE, &path, Some(&t), None).await;
    assert!(st < 300, "{st} {b}");
    vmaas_tests::vms::wait_object(&s, &t, &path, "deleted", 120, |v| v.is_none()).await;
    assert!(qemu_pids(&id).is_empty() && swtpms(&dir) == 0 && !dir.exists(), "nothing of the VM is left");
}

const EFI_SB: &str = r#"
id: efi-sb
title: EFI guest under Secure Boot, no TPM
spec_defaults:
  image: test-guest-efi
  memory: 512Mi
  disk_size: 256Mi
  firmware: efi
  secure_boot: true
"#;

/// The platform a guest without a TPM sees: EFI, Secure Boot, its variable.
fn efi_seen(s: &Server, t: &str, vm: &str) -> String {
    platform_seen(s, t, vm).split(" nv=").next().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_efi_guest_starts_from_its_templates_snapshot_with_a_variable_store_of_its_own() {
    let s = Server::start_qemu().await;
    publish(&s, &format!("{}{}", EFI_SB.trim_end(), SERVED));
    let t = s.token("acme", false);
    let alpha = create(&s, &t, "alpha", "efi-sb").await;
    // While its template is made (tens of seconds), no other process can
    // take the address alpha was given: the server holds its port until
    // alpha's QEMU binds it, and alpha comes up there, from the snapshot.
    let given = external_ip_given(&s, &alpha).await;
    let taken = std::net::TcpListener::bind((given, 80));
    assert!(taken.as_ref().is_err_and(|e| e.kind() == std::io::ErrorKind::AddrInUse), "alpha's address is held: {taken:?}");
    let vm = ready(&s, &t, &alpha).await;
    let restored = boot_of(&vm);
    assert!(restored.contains("restored from template snapshot "), "{restored}");
    assert_eq!(vm["status"]["externalIP"].as_str(), Some(given.to_string().as_str()), "alpha kept its address");
    let fresh = "efi=yes sb=1 tpm=no var=";
    assert_eq!(efi_seen(&s, &t, "alpha"), fresh, "a clone boots under Secure Boot");
    let write = format!("printf '\\x07\\x00\\x00\\x00alpha-only' > /sys/firmware/efi/efivars/VmaasTest-{GUID} && echo \"<<$((40+2))>>\"");
    assert_eq!(said(&console(&s, &t, "alpha", &write)), "42");
    let beta = create(&s, &t, "beta", "efi-sb").await;
    assert_eq!(boot_of(&ready(&s, &t, &beta).await), restored, "the same snapshot");
    assert_eq!(efi_seen(&s, &t, "beta"), fresh, "a clone's variable store is its own");
    let written = "efi=yes sb=1 tpm=no var=alpha-only";
    assert_eq!(efi_seen(&s, &t, "alpha"), written);

    // A clone moves like any VM: the same boot, its store with it.
    let boot_id = "echo \"<<$(cat /proc/sys/kernel/random/boot_id)>>\"";
    let before = said(&console(&s, &t, "alpha", boot_id));
    let (old, path) = (qemu_pids(&alpha), format!("{V1}/virtual_machines/{alpha}"));
    let (st, b) = s.raw(Method::POST, &format!("{path}/migrate"), Some(&s.token("ops", true)), Some(json!({}))).await;
    assert_eq!(st, 202, "{b}");
    wait_until(&s, &t, &alpha, "READY on a new QEMU", 180, |v| state(v) == "VIRTUAL_MACHINE_STATE_READY" && qemu_pids(&alpha) != old).await;
    assert_eq!(said(&console(&s, &t, "alpha", boot_id)), before, "the same boot");
    assert_eq!(efi_seen(&s, &t, "alpha"), written, "after a live migration");

    // Started again, it boots cold: the snapshot's store would replace its own.
    let patch = |state: &'static str| json!({"object": {"spec": {"state": state}}});
    let (st, b) = s.raw(Method::PATCH, &path, Some(&t), Some(patch("stopped"))).await;
    assert_eq!(st, 200, "{b}");
    wait_until(&s, &t, &alpha, "STOPPED", 120, |v| state(v) == "VIRTUAL_MACHINE_STATE_STOPPED").await;
    let (st, b) = s.raw(Method::PATCH, &path, Some(&t), Some(patch("started"))).await;
    assert_eq!(st, 200, "{b}");
    let cold = boot_of(&ready(&s, &t, &alpha).await);
    assert!(cold.ends_with("(cold boot: its EFI variable store holds what it wrote)"), "{cold}");
    assert_eq!(efi_seen(&s, &t, "alpha"), written, "after a stop and start");
}

/// The external IP VM `id` was given on this host, once its launch began
/// (from its state file: its status says only once it has started).
async fn external_ip_given(s: &Server, id: &str) -> std::net::Ipv4Addr {
    let file = s.data_dir.join("vms").join(id).join("vm.json");
    for _ in 0..600 {
        let state: serde_json::Value = std::fs::read(&file).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
        if let Some(ip) = state["external_ip"].as_str().and_then(|a| a.parse().ok()) {
            return ip;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("{} names no external IP in 30 s", file.display());
}

/// How many swtpm processes serve the VM whose directory is `dir`.
fn swtpms(dir: &std::path::Path) -> usize {
    vmaas_tests::pids_of("swtpm", &format!("dir={}/", dir.display())).len()
}

const WINDOWS: &str = r#"
id: windows-ready
title: Windows-ready guest
spec_defaults:
  image: test-guest-efi
  memory: 512Mi
  disk_size: 256Mi
  guest_os_family: windows
"#;

/// The words of QEMU's command line for VM `id`.
fn qemu_cmdline(id: &str) -> Vec<String> {
    let pid = qemu_pids(id).into_iter().next().expect("a QEMU for the VM");
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).expect("its command line");
    raw.split(|b| *b == 0).map(|w| String::from_utf8_lossy(w).into_owned()).collect()
}

/// The word after `flag` on a command line.
fn after<'a>(words: &'a [String], flag: &str) -> Vec<&'a str> {
    words.windows(2).filter(|w| w[0] == flag).map(|w| w[1].as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_windows_family_gets_secure_boot_a_tpm_hyperv_and_a_local_clock_by_default() {
    let s = Server::start_qemu().await;
    publish(&s, &format!("{}{}", WINDOWS.trim_end(), SERVED));
    let t = s.token("acme", false);
    let body = json!({"object": {"metadata": {"name": "win"}, "spec": {"template": "windows-ready"}}});
    let (st, vm) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(body)).await;
    assert_eq!(st, 201, "{vm}");
    let id = vm["object"]["id"].as_str().unwrap().to_owned();
    ready(&s, &t, &id).await;
    let words = qemu_cmdline(&id);
    assert_eq!(after(&words, "-machine"), ["q35,smm=on,hpet=off"], "Secure Boot needs SMM");
    let cpu = after(&words, "-cpu")[0];
    for hv in ["hv-relaxed=on", "hv-vapic=on", "hv-spinlocks=0x1fff", "hv-time=on", "hv-synic=on", "hv-stimer=on"] {
        assert!(cpu.split(',').any(|o| o == hv), "{hv} in -cpu {cpu}");
    }
    assert_eq!(after(&words, "-rtc"), ["base=localtime"]);
    assert!(after(&words, "-drive").iter().any(|d| d.contains("OVMF_CODE_4M.secboot.fd") && d.contains("readonly=on")), "{words:?}");
    assert_eq!(after(&words, "-device").iter().filter(|d| d.starts_with("tpm-crb")).count(), 1, "a TPM by default");
    let seen = said(&console(
        &s,
        &t,
        "win",
        "echo \"<<$(tail -c +5 /sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c | od -An -tu1 | tr -d ' ') $(ls /sys/class/tpm)>>\"",
    ));
    assert_eq!(seen, "1 tpm0", "the guest boots under Secure Boot with a TPM");
}

#[tokio::test]
async fn a_template_with_secure_boot_on_bios_is_refused_naming_the_field() {
    let s = Server::start(vmaas_tests::Db::Sqlite).await.expect("sqlite");
    let admin = s.token("ops", true);
    let bad = json!({"id": "bad-sb", "spec_defaults": {"image": "test-guest-efi", "firmware": "bios", "secure_boot": true}});
    let (st, b) = s.raw(Method::POST, &format!("{V1}/virtual_machine_templates"), Some(&admin), Some(bad)).await;
    assert_eq!(st, 400, "{b}");
    assert!(b.to_string().contains("spec_defaults.secure_boot") && b.to_string().contains("needs firmware efi"), "{b}");
    let odd = json!({"id": "bad-fw", "spec_defaults": {"firmware": "uefi"}});
    let (st, b) = s.raw(Method::POST, &format!("{V1}/virtual_machine_templates"), Some(&admin), Some(odd)).await;
    assert_eq!(st, 400, "{b}");
    assert!(b.to_string().contains("firmware"), "{b}");
    let good = json!({"id": "good-sb", "spec_defaults": {"image": "test-guest-efi", "firmware": "efi", "secure_boot": true, "tpm": true}});
    let (st, b) = s.raw(Method::POST, &format!("{V1}/virtual_machine_templates"), Some(&admin), Some(good)).await;
    assert_eq!(st, 201, "{b}");
    let (_, got) = s.raw(Method::GET, &format!("{V1}/virtual_machine_templates/good-sb"), Some(&admin), None).await;
    let d = &got["object"]["spec_defaults"];
    assert_eq!((&d["firmware"], &d["secure_boot"], &d["tpm"]), (&json!("efi"), &json!(true), &json!(true)), "{got}");
}

/// A template that says nothing of the platform: the image chooses it.
const PICK: &str = r#"
id: pick
parameters:
  - { name: vm_image, type: string, default: { value: test-guest } }
spec_defaults:
  memory: 512Mi
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uploaded_image_that_boots_by_efi_says_so_and_its_vms_boot_under_secure_boot() {
    let s = Server::start_qemu().await;
    publish(&s, &format!("{}{}", PICK.trim_end(), SERVED));
    let t = s.token("acme", false);
    let image = json!({"object": {"metadata": {"name": "signed"},
        "spec": {"description": "the EFI test guest", "firmware": "efi", "secure_boot": true, "guest_os_family": "GUEST_OS_FAMILY_LINUX"}}});
    let (st, img) = s.raw(Method::POST, &format!("{V1}/images"), Some(&t), Some(image)).await;
    assert_eq!(st, 201, "{img}");
    assert_eq!((&img["object"]["spec"]["firmware"], &img["object"]["spec"]["guest_os_family"]), (&json!("efi"), &json!("linux")), "{img}");
    let id = img["object"]["id"].as_str().unwrap().to_owned();
    let disk = std::fs::read(vmaas_tests::images_dir().join("test-guest-efi/disk.qcow2")).unwrap();
    let rsp =
        reqwest::Client::new().put(format!("{}{V1}/images/{id}/content", s.endpoint)).bearer_auth(&t).body(disk).send().await.unwrap();
    assert_eq!(rsp.status(), 200);
    let bad = json!({"object": {"metadata": {"name": "bad"}, "spec": {"firmware": "bios", "secure_boot": true}}});
    let (st, e) = s.raw(Method::POST, &format!("{V1}/images"), Some(&t), Some(bad)).await;
    assert!(st == 400 && e.to_string().contains("object.spec.secure_boot"), "{st} {e}");

    let body = json!({"object": {"metadata": {"name": "vault"}, "spec": {"template": "pick", "template_parameters": {"vm_image": {"value": "signed"}}}}});
    let (st, vm) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(body)).await;
    assert_eq!(st, 201, "{vm}");
    let vm = vm["object"]["id"].as_str().unwrap().to_owned();
    ready(&s, &t, &vm).await;
    assert!(after(&qemu_cmdline(&vm), "-drive").iter().any(|d| d.contains("OVMF_CODE_4M.secboot.fd")), "OVMF's Secure Boot build");
    let seen = said(&console(
        &s,
        &t,
        "vault",
        &format!("echo \"<<$(tail -c +5 /sys/firmware/efi/efivars/SecureBoot-{GLOBAL} | od -An -tu1 | tr -d ' ')>>\""),
    ));
    assert_eq!(seen, "1", "the guest boots under Secure Boot, as its image says");
}
