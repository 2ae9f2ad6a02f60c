//! `vmaas vm ssh NAME [-- COMMAND]`: the `ssh` client to a VM's external
//! address, as the user the image makes (`debian` on the Debian image),
//! with the key the tenant gave at create (the agent's or `-i`'s). Host
//! keys are remembered per VM (`HostKeyAlias`, in `known_hosts` beside
//! the config file), so an address that later serves another VM is not
//! mistaken for this one; a VM's first key is accepted. Without a
//! terminal (a pipeline) ssh never prompts.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, bail};
use clap::Args;
use vmaas_client::Client;

/// `vmaas vm ssh …`.
#[derive(Args, Debug)]
pub struct SshArgs {
    /// Name or id.
    vm: String,
    /// The user to log in as.
    #[arg(short = 'l', long, default_value = "debian")]
    user: String,
    /// The private key (default: ssh's own and the agent's).
    #[arg(short = 'i', long, value_name = "FILE")]
    identity: Option<PathBuf>,
    /// The port on the external address.
    #[arg(short = 'p', long, default_value_t = 22)]
    port: u16,
    /// The command to run instead of a shell (after `--`).
    #[arg(last = true)]
    command: Vec<String>,
}

/// The `ssh` command line for `args` to `address`, remembering host keys in `known_hosts` as VM `id`'s.
fn command_line(args: &SshArgs, id: &str, address: &str, known_hosts: &std::path::Path) -> Vec<String> {
    let mut line = vec!["-p".to_owned(), args.port.to_string()];
    for option in [
        format!("HostKeyAlias=vmaas-{id}"),
        "StrictHostKeyChecking=accept-new".to_owned(),
        format!("UserKnownHostsFile={}", known_hosts.display()),
        "ConnectTimeout=10".to_owned(),
    ] {
        line.extend(["-o".to_owned(), option]);
    }
    if !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        // No one to answer a prompt: fail instead of asking.
        line.extend(["-o".to_owned(), "BatchMode=yes".to_owned()]);
    }
    if let Some(key) = &args.identity {
        line.extend(["-i".to_owned(), key.display().to_string()]);
    }
    line.push(format!("{}@{address}", args.user));
    line.extend(args.command.iter().cloned());
    line
}

/// Runs `ssh` to the VM `args` names; its exit status is this process's.
pub async fn run(client: &Client, args: SshArgs) -> anyhow::Result<()> {
    let vm = client.find_vm(&args.vm).await?;
    let Some(address) = vm.status.external_ip.clone() else {
        bail!(
            "virtual machine {:?} has no external address yet (it is {}): `vmaas vm wait {}` first",
            vm.metadata.name,
            vm.status.state.short(),
            vm.metadata.name
        );
    };
    let config = crate::config::default_path();
    let dir = config.parent().map(PathBuf::from).unwrap_or_default();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let line = command_line(&args, &vm.id, &address, &dir.join("known_hosts"));
    let status = Command::new("ssh").args(&line).status().context("running ssh (install openssh-client)")?;
    std::process::exit(status.code().unwrap_or(255));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_key_is_the_vms_and_the_command_comes_last() {
        let args = SshArgs {
            vm: "web".into(),
            user: "debian".into(),
            identity: Some("/k/id".into()),
            port: 2222,
            command: vec!["uname".into(), "-a".into()],
        };
        let line = command_line(&args, "abc", "127.0.0.9", std::path::Path::new("/c/known_hosts"));
        let text = line.join(" ");
        assert!(text.starts_with("-p 2222 -o HostKeyAlias=vmaas-abc -o StrictHostKeyChecking=accept-new"), "{text}");
        assert!(text.ends_with("-i /k/id debian@127.0.0.9 uname -a"), "{text}");
    }
}
