//! The VM state machine: from what a backend observes, and what the tenant
//! asked for, to the status the API shows. Pure and deterministic, so the
//! server's reconciler and the Crossplane function derive status the same way.

use chrono::{DateTime, Utc};

use super::{Condition, ConditionStatus, ConditionType, PowerState, VirtualMachineStatus, VmState};

pub use super::reason::Reason;

/// Where a VM is, as a backend sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// The backend has nothing for this VM.
    Absent,
    /// Being created or started; not answering yet.
    Starting(Reason),
    /// Running and answering its readiness probe.
    Ready,
    /// Being powered off.
    Stopping(Reason),
    /// Powered off.
    Stopped,
    /// Running, and being moved to another host (live migration); the
    /// guest keeps running.
    Migrating(Reason),
    /// Running but frozen (paused): its vCPUs stopped, its memory kept.
    Paused,
    /// Cannot be made to match the spec without a change from the tenant or the provider.
    Failed(Reason),
}

/// One observation of one VM by a backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    /// Where the VM is.
    pub phase: Phase,
    /// The VM's own address, once known.
    pub internal_ip: Option<String>,
    /// The floating address pointing to it, once assigned.
    pub external_ip: Option<String>,
    /// The address of each NIC on a subnet, in order, once running.
    pub nic_ips: Vec<String>,
    /// Set while something is wrong but being handled, e.g. a crashed guest being restarted.
    pub degraded: Option<Reason>,
    /// Set while the running guest has an older shape than the spec asks
    /// (see [`crate::boot_shape`]): a restart applies it.
    pub restart_required: Option<Reason>,
    /// How the running guest was started (e.g. restored from a template
    /// snapshot, or a cold boot and why), added to its Ready condition.
    pub boot: Option<String>,
    /// The cluster it is on, when the backend drives several; none: the one it was.
    pub cluster: Option<String>,
    /// Whether it can live-migrate, when the backend says (while it runs).
    pub migratable: Option<super::migratable::Migratability>,
}

impl Observation {
    /// An observation of `phase` with no addresses and nothing degraded.
    pub fn new(phase: Phase) -> Self {
        Self {
            phase,
            internal_ip: None,
            external_ip: None,
            nic_ips: Vec::new(),
            degraded: None,
            restart_required: None,
            boot: None,
            cluster: None,
            migratable: None,
        }
    }

    /// An observation of `phase` that keeps the addresses `status` shows:
    /// what the status says before the backend has looked again.
    pub fn keeping(status: &VirtualMachineStatus, phase: Phase) -> Self {
        let mut o = Self::new(phase);
        o.internal_ip = status.internal_ip.clone();
        o.external_ip = status.external_ip.clone();
        o.nic_ips = status.internal_ips.clone();
        o
    }
}

/// What the reconciler knows of the tenant's wishes for one VM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Desired {
    /// Run (`started`) or stay off (`stopped`).
    Power(PowerState),
    /// Deletion was requested.
    Deleted,
}

/// The status to show for `observed` when `desired` is wanted, keeping each
/// condition's `last_transition_time` from `previous` unless its status changed.
pub fn derive_status(
    desired: Desired,
    observed: &Observation,
    previous: &VirtualMachineStatus,
    now: DateTime<Utc>,
) -> VirtualMachineStatus {
    use ConditionType as C;
    let none = || None::<Reason>;
    let (state, progressing, failed): (VmState, Option<Reason>, Option<Reason>) = match (desired, &observed.phase) {
        (Desired::Deleted, _) => (VmState::Deleting, Some(Reason::new("Deleting", "the VM and its resources are being removed")), none()),
        (_, Phase::Failed(r)) => (VmState::Failed, none(), Some(r.clone())),
        (Desired::Power(PowerState::Started), Phase::Ready) => (VmState::Ready, none(), none()),
        (Desired::Power(PowerState::Started), Phase::Migrating(r)) => (VmState::Migrating, Some(r.clone()), none()),
        (Desired::Power(PowerState::Started), Phase::Starting(r)) => (VmState::Progressing, Some(r.clone()), none()),
        (Desired::Power(PowerState::Started), Phase::Absent) => {
            (VmState::Progressing, Some(Reason::new("Creating", "the VM is being created")), none())
        }
        (Desired::Power(PowerState::Started), Phase::Stopping(_) | Phase::Stopped) => {
            (VmState::Progressing, Some(Reason::new("Starting", "the VM is being started")), none())
        }
        (Desired::Power(PowerState::Stopped), Phase::Stopped | Phase::Absent) => (VmState::Stopped, none(), none()),
        (Desired::Power(PowerState::Stopped), Phase::Stopping(r)) => (VmState::Progressing, Some(r.clone()), none()),
        (Desired::Power(PowerState::Stopped), Phase::Ready | Phase::Starting(_) | Phase::Migrating(_) | Phase::Paused) => {
            (VmState::Progressing, Some(Reason::new("Stopping", "the VM is being powered off")), none())
        }
        (Desired::Power(PowerState::Started), Phase::Paused) => {
            (VmState::Progressing, Some(Reason::new("Resuming", "the VM is being resumed")), none())
        }
        (Desired::Power(PowerState::Paused), Phase::Paused) => (VmState::Paused, none(), none()),
        (Desired::Power(PowerState::Paused), Phase::Absent | Phase::Stopping(_) | Phase::Stopped) => {
            (VmState::Progressing, Some(Reason::new("Starting", "the VM is being started, to be paused")), none())
        }
        (Desired::Power(PowerState::Paused), Phase::Ready | Phase::Starting(_) | Phase::Migrating(_)) => {
            (VmState::Progressing, Some(Reason::new("Pausing", "the VM is being paused")), none())
        }
    };
    let ready_reason = match state {
        VmState::Ready => Some(Reason::new(
            "GuestReady",
            match &observed.boot {
                Some(how) => format!("the guest answers its readiness probe ({how})"),
                None => "the guest answers its readiness probe".to_owned(),
            },
        )),
        _ => None,
    };
    let wanted = [
        (C::Progressing, progressing),
        (C::Ready, ready_reason),
        (C::Failed, failed),
        (C::Degraded, if state == VmState::Deleting { None } else { observed.degraded.clone() }),
        (C::RestartRequired, if state == VmState::Ready { observed.restart_required.clone() } else { None }),
    ];
    let mut conditions: Vec<Condition> = wanted
        .into_iter()
        // RESTART_REQUIRED is listed once it has held (OSAC's VirtualMachine,
        // and seed 000's example, list the other four only).
        .filter(|(kind, holds)| *kind != C::RestartRequired || holds.is_some() || previous.condition(*kind).is_some())
        .map(|(kind, holds)| {
            let status = ConditionStatus::from(holds.is_some());
            Condition::observed(kind, status, holds, previous.condition(kind), now)
        })
        .collect();
    conditions.extend(super::migratable::condition(state, observed.migratable.as_ref(), previous, now));
    let keep_ips = !matches!(state, VmState::Stopped | VmState::Deleting);
    VirtualMachineStatus {
        state,
        conditions,
        internal_ip: observed.internal_ip.clone().filter(|_| keep_ips),
        external_ip: observed.external_ip.clone().filter(|_| keep_ips),
        internal_ips: if keep_ips { observed.nic_ips.clone() } else { Vec::new() },
        // Placed once: the cluster stays named until the VM is gone (or
        // moved: then the one it moved to is).
        cluster: observed.cluster.clone().or_else(|| previous.cluster.clone()),
        // The reconciler's, from the instance type; kept until it writes anew.
        instance_type_deprecation: previous.instance_type_deprecation.clone(),
    }
}

/// The status of a VM that was just created and not observed yet.
pub fn initial_status(desired: PowerState, now: DateTime<Utc>) -> VirtualMachineStatus {
    let mut s = derive_status(Desired::Power(desired), &Observation::new(Phase::Absent), &VirtualMachineStatus::default(), now);
    if desired == PowerState::Stopped {
        // Not created yet: progressing towards "stopped" still means creating the disks.
        s.state = VmState::Progressing;
        if let Some(c) = s.conditions.iter_mut().find(|c| c.kind == ConditionType::Progressing) {
            c.status = ConditionStatus::True;
            c.reason = Some("Creating".into());
            c.message = "the VM is being created".into();
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + s, 0).single().unwrap()
    }

    fn cond(s: &VirtualMachineStatus, k: ConditionType) -> &Condition {
        s.condition(k).unwrap()
    }

    #[test]
    fn ready_sets_ready_true_and_others_false() {
        let mut obs = Observation::new(Phase::Ready);
        obs.internal_ip = Some("10.0.2.15".into());
        obs.external_ip = Some("127.42.0.1".into());
        let s = derive_status(Desired::Power(PowerState::Started), &obs, &VirtualMachineStatus::default(), t(0));
        assert_eq!(s.state, VmState::Ready);
        assert_eq!(cond(&s, ConditionType::Ready).status, ConditionStatus::True);
        assert_eq!(cond(&s, ConditionType::Progressing).status, ConditionStatus::False);
        assert_eq!(cond(&s, ConditionType::Failed).status, ConditionStatus::False);
        assert_eq!(cond(&s, ConditionType::Degraded).status, ConditionStatus::False);
        assert!(s.condition(ConditionType::RestartRequired).is_none(), "not listed before it first holds");
        assert_eq!(s.conditions.len(), 4);
        assert_eq!(s.external_ip.as_deref(), Some("127.42.0.1"));
        // A pending shape shows only on a running VM.
        obs.restart_required = Some(Reason::new("ConfigurationChanged", "cpu_cores 1 → 2"));
        let s = derive_status(Desired::Power(PowerState::Started), &obs, &s, t(1));
        assert_eq!(cond(&s, ConditionType::RestartRequired).status, ConditionStatus::True);
        assert_eq!(s.conditions.len(), 5);
        let s = derive_status(Desired::Power(PowerState::Stopped), &Observation { phase: Phase::Stopped, ..obs }, &s, t(2));
        assert_eq!(cond(&s, ConditionType::RestartRequired).status, ConditionStatus::False);
    }

    #[test]
    fn paused_is_its_own_state_and_not_ready() {
        let paused = Observation::new(Phase::Paused);
        let s = derive_status(Desired::Power(PowerState::Paused), &paused, &VirtualMachineStatus::default(), t(0));
        assert_eq!((s.state, cond(&s, ConditionType::Ready).status), (VmState::Paused, ConditionStatus::False));
        let s = derive_status(Desired::Power(PowerState::Started), &paused, &s, t(1));
        assert_eq!((s.state, cond(&s, ConditionType::Progressing).reason.as_deref()), (VmState::Progressing, Some("Resuming")));
        let s = derive_status(Desired::Power(PowerState::Paused), &Observation::new(Phase::Ready), &s, t(2));
        assert_eq!((s.state, cond(&s, ConditionType::Progressing).reason.as_deref()), (VmState::Progressing, Some("Pausing")));
        assert_eq!("paused".parse::<PowerState>(), Ok(PowerState::Paused));
        assert!(PowerState::Paused.holds_host() && !PowerState::Stopped.holds_host());
    }

    #[test]
    fn transition_time_moves_only_on_change() {
        let starting = Observation::new(Phase::Starting(Reason::new("Booting", "")));
        let s1 = derive_status(Desired::Power(PowerState::Started), &starting, &VirtualMachineStatus::default(), t(0));
        let s2 = derive_status(Desired::Power(PowerState::Started), &starting, &s1, t(5));
        assert_eq!(cond(&s2, ConditionType::Progressing).last_transition_time, Some(t(0)));
        let s3 = derive_status(Desired::Power(PowerState::Started), &Observation::new(Phase::Ready), &s2, t(9));
        assert_eq!(cond(&s3, ConditionType::Progressing).last_transition_time, Some(t(9)));
        assert_eq!(cond(&s3, ConditionType::Ready).last_transition_time, Some(t(9)));
        assert_eq!(cond(&s3, ConditionType::Failed).last_transition_time, Some(t(0)));
    }

    #[test]
    fn stop_and_failure_and_delete() {
        let stopped =
            derive_status(Desired::Power(PowerState::Stopped), &Observation::new(Phase::Stopped), &VirtualMachineStatus::default(), t(0));
        assert_eq!(stopped.state, VmState::Stopped);
        let stopping =
            derive_status(Desired::Power(PowerState::Stopped), &Observation::new(Phase::Ready), &VirtualMachineStatus::default(), t(0));
        assert_eq!(stopping.state, VmState::Progressing);
        assert_eq!(cond(&stopping, ConditionType::Progressing).reason.as_deref(), Some("Stopping"));
        let failed = derive_status(
            Desired::Power(PowerState::Started),
            &Observation::new(Phase::Failed(Reason::new("NoGPUAvailable", "no GPU on this host"))),
            &VirtualMachineStatus::default(),
            t(0),
        );
        assert_eq!(failed.state, VmState::Failed);
        assert_eq!(cond(&failed, ConditionType::Failed).reason.as_deref(), Some("NoGPUAvailable"));
        let mut obs = Observation::new(Phase::Ready);
        obs.external_ip = Some("127.42.0.9".into());
        let deleting = derive_status(Desired::Deleted, &obs, &VirtualMachineStatus::default(), t(0));
        assert_eq!(deleting.state, VmState::Deleting);
        assert_eq!(deleting.external_ip, None);
    }

    #[test]
    fn degraded_is_reported_alongside() {
        let mut obs = Observation::new(Phase::Starting(Reason::new("Restarting", "guest process exited")));
        obs.degraded = Some(Reason::new("GuestCrashed", "QEMU exited unexpectedly; restarting"));
        let s = derive_status(Desired::Power(PowerState::Started), &obs, &VirtualMachineStatus::default(), t(0));
        assert_eq!(s.state, VmState::Progressing);
        assert_eq!(cond(&s, ConditionType::Degraded).status, ConditionStatus::True);
        assert_eq!(cond(&s, ConditionType::Degraded).reason.as_deref(), Some("GuestCrashed"));
    }

    #[test]
    fn initial_status_is_progressing() {
        assert_eq!(initial_status(PowerState::Started, t(0)).state, VmState::Progressing);
        assert_eq!(initial_status(PowerState::Stopped, t(0)).state, VmState::Progressing);
    }
}
