//! `vmaas_image` with OpenTofu and both Terraform versions (`examples/terraform/image-import`):
//! an image imported from a URL on loopback, checked against its SHA-256
//! (a wrong one fails the apply with the server's reason), and a VM booting
//! from it (template `own-image`); destroy removes both.

use reqwest::Method;
use vmaas_tests::Server;
use vmaas_tests::files::FileServer;
use vmaas_tests::files::sha256_of;
use vmaas_tests::registry::{PrivateDisk, private_disk};
use vmaas_tests::tf::{Tf, Workspace, repo};
use vmaas_tests::vms::{V1, publish};

async fn scenario(tf: Tf) {
    let s = Server::start_qemu_with(&["--image-source-allow", "127.0.0.1"]).await;
    publish(&s, &std::fs::read_to_string(repo().join("examples/templates/own-image.yaml")).unwrap());
    let t = s.token("ci", false);
    let bios = vmaas_tests::images_dir().join("test-guest/bios.qcow2");
    let web = FileServer::start(bios.parent().unwrap().to_owned()).await;
    let main_tf = std::fs::read_to_string(repo().join("examples/terraform/image-import/main.tf")).unwrap();
    let w = Workspace::new(tf, &s, &t, &main_tf);
    let url = format!("image_url={}/bios.qcow2", web.url);

    let out = w.run(&["apply", "-auto-approve", "-no-color", "-var", &url, "-var", &format!("image_sha256={}", "0".repeat(64))]);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success() && text.contains("checksum mismatch"), "{text}");

    let sum = format!("image_sha256={}", sha256_of(&bios));
    w.apply(&["-var", &url, "-var", &sum]);
    assert_eq!(
        (w.output("image_state"), w.output("image_format"), w.output("status")),
        ("IMAGE_STATE_READY".into(), "qcow2".into(), "READY".into())
    );
    let (code, text) = w.plan_code(&["-var", &url, "-var", &sum]);
    assert_eq!(code, 0, "a no-op re-plan:\n{text}");

    w.ok(&["destroy", "-auto-approve", "-no-color", "-var", &url, "-var", &sum]);
    let (_, images) = s.raw(Method::GET, &format!("{V1}/images?name=my-os"), Some(&t), None).await;
    assert_eq!(images["total"], 0, "{images}");
    assert_eq!(s.raw(Method::GET, &format!("{V1}/virtual_machines"), Some(&t), None).await.1["total"], 0);
}

vmaas_tests::on_every_terraform!(scenario: image_import_tofu, image_import_terraform_1_0_3, image_import_terraform_1_15_5);

/// A source that accepts connections and never answers: the import stays
/// under way, and a `timeouts { create = "3s" }` block ends the apply at
/// 3 s with an error saying so (the kind's default is an hour); the image
/// exists, so it is in the state, and destroy removes it.
async fn import_timeout(tf: Tf) {
    let s = Server::start_qemu_with(&["--image-source-allow", "127.0.0.1"]).await;
    let t = s.token("ci", false);
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/never.qcow2", silent.local_addr().unwrap());
    let held = std::thread::spawn(move || {
        // Holds what it accepts until the test ends (at most 8 connections).
        let conns: Vec<_> = silent.incoming().take(8).filter_map(Result::ok).collect();
        drop(conns);
    });
    let main_tf = format!(
        "terraform {{\n  required_providers {{\n    vmaas = {{ source = \"vmaas/vmaas\" }}\n  }}\n}}\nprovider \"vmaas\" {{}}\n\
         resource \"vmaas_image\" \"slow\" {{\n  name   = \"slow\"\n  source = \"{url}\"\n  timeouts {{\n    create = \"3s\"\n  }}\n}}\n"
    );
    let w = Workspace::new(tf, &s, &t, &main_tf);
    let started = std::time::Instant::now();
    let out = w.run(&["apply", "-auto-approve", "-no-color", "-input=false"]);
    let took = started.elapsed();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success() && text.contains("not done after 3s"), "{tf:?}: {text}");
    assert!(took < std::time::Duration::from_secs(60), "{tf:?}: the apply took {took:?}");
    let state = w.ok(&["state", "list"]);
    assert!(state.contains("vmaas_image.slow"), "{tf:?}: the image is in the state (tainted): {state}");
    w.ok(&["destroy", "-auto-approve", "-no-color"]);
    let (_, images) = s.raw(Method::GET, &format!("{V1}/images?name=slow"), Some(&t), None).await;
    assert_eq!(images["total"], 0, "{images}");
    drop(held);
}

vmaas_tests::on_every_terraform!(import_timeout: image_timeout_tofu, image_timeout_terraform_1_0_3, image_timeout_terraform_1_15_5);

/// A `docker://` image from a registry that asks for credentials: the
/// password is given write-only on OpenTofu and Terraform 1.15 (never in a
/// plan or the state file) and as the sensitive `registry_password` on
/// Terraform 1.0.3; a wrong one fails the apply with the server's reason,
/// and giving both ways at once is refused naming the attribute.
async fn registry_image(tf: Tf) {
    const PASSWORD: &str = "tf-pull-s3cret-51d0";
    let PrivateDisk { registry: _registry, source, server: s } = private_disk(PASSWORD).await;
    let t = s.token("ci", false);
    let attribute = if tf == Tf::V1_0_3 { "registry_password" } else { "registry_password_wo" };
    let main_tf = format!(
        "terraform {{\n  required_providers {{\n    vmaas = {{ source = \"vmaas/vmaas\" }}\n  }}\n}}\n\
         variable \"password\" {{\n  type      = string\n  sensitive = true\n}}\n\
         resource \"vmaas_image\" \"oci\" {{\n  name              = \"oci\"\n  source            = \"{source}\"\n  \
         registry_username = \"puller\"\n  {attribute} = var.password\n}}\n"
    );
    let w = Workspace::new(tf, &s, &t, &main_tf);
    let out = w.run(&["apply", "-auto-approve", "-no-color", "-input=false", "-var", "password=not-it"]);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success() && text.contains("refused the credentials given"), "{tf:?}: {text}");
    w.ok(&["destroy", "-auto-approve", "-no-color", "-input=false", "-var", "password=not-it"]);

    let password = format!("password={PASSWORD}");
    w.apply(&["-var", &password]);
    let (_, images) = s.raw(Method::GET, &format!("{V1}/images?name=oci"), Some(&t), None).await;
    assert_eq!(images["items"][0]["status"]["state"], "IMAGE_STATE_READY", "{images}");
    let (code, text) = w.plan_code(&["-var", &password]);
    assert_eq!(code, 0, "a no-op re-plan:\n{text}");
    if tf != Tf::V1_0_3 {
        let state = std::fs::read_to_string(w.dir().join("terraform.tfstate")).unwrap_or_default();
        assert!(state.contains("puller") && !state.contains(PASSWORD), "{tf:?}: the state holds the write-only password: {state}");
    }
    w.ok(&["destroy", "-auto-approve", "-no-color", "-input=false", "-var", &password]);

    if tf == Tf::Tofu {
        let both = main_tf.replace("registry_username = \"puller\"", "registry_username = \"puller\"\n  registry_password = var.password");
        let w = Workspace::new(tf, &s, &t, &both);
        let out = w.run(&["plan", "-no-color", "-input=false", "-var", &password]);
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success() && text.contains("registry_password and registry_password_wo give the same value"), "{text}");
    }
}

vmaas_tests::on_every_terraform!(registry_image: registry_image_tofu, registry_image_terraform_1_0_3, registry_image_terraform_1_15_5);
