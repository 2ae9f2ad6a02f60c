//! Prometheus metrics, served at `/metrics` in the text exposition format.
//! Two registries hold them: the server's own figures (requests,
//! reconcile passes, VMs by state), which anyone may read, and those that
//! name a tenant or one of its VMs (quotas, each VM's memory), which only
//! an administrator's token, or `--metrics-listen`'s own address, reads.

use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of an HTTP request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HttpLabels {
    /// GET, POST, …
    pub method: &'static str,
    /// The route template, e.g. `/api/fulfillment/v1/virtual_machines/{id}`.
    pub route: String,
    /// The response status code.
    pub status: u16,
}

/// Labels of a VM count.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    /// e.g. `READY`.
    pub state: String,
}

/// Labels of a quota figure.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QuotaLabels {
    /// The tenant (only tenants with a quota are exported).
    pub tenant: String,
    /// `virtual_machines`, `cores`, `memory` (bytes), `disk` (bytes) or `external_ips`.
    pub resource: String,
}

/// Labels of one VM's figure.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VmLabels {
    /// The VM's id.
    pub vm: String,
}

/// Labels of the build's figure.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    /// The server's version.
    pub version: String,
}

/// `vmaas_build_info{version=…} 1`.
fn build_info(version: &str) -> Family<BuildLabels, Gauge> {
    let f = Family::<BuildLabels, Gauge>::default();
    f.get_or_create(&BuildLabels { version: version.to_owned() }).set(1);
    f
}

fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 18))
}

/// Every metric the server exports.
pub struct Metrics {
    registry: Mutex<Registry>,
    /// The same, plus what names a tenant or its VMs.
    full: Mutex<Registry>,
    http_requests: Family<HttpLabels, Counter>,
    http_duration: Family<HttpLabels, Histogram, fn() -> Histogram>,
    reconcile_passes: Counter,
    reconcile_errors: Counter,
    reconcile_duration: Histogram,
    vms: Family<StateLabels, Gauge>,
    quarantined: Gauge,
    quota_limit: Family<QuotaLabels, Gauge>,
    quota_usage: Family<QuotaLabels, Gauge>,
    vm_resident: Family<VmLabels, Gauge>,
    vm_unique: Family<VmLabels, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Self {
        // Unprefixed, so that the standard `process_*` metrics keep their names.
        let (mut registry, mut full) = (Registry::default(), Registry::default());
        let http_requests = Family::<HttpLabels, Counter>::default();
        let http_duration =
            Family::<HttpLabels, Histogram, fn() -> Histogram>::new_with_constructor(latency_histogram as fn() -> Histogram);
        let reconcile_passes = Counter::default();
        let reconcile_errors = Counter::default();
        let reconcile_duration = latency_histogram();
        let vms = Family::<StateLabels, Gauge>::default();
        let quarantined = Gauge::default();
        let (quota_limit, quota_usage) = (Family::<QuotaLabels, Gauge>::default(), Family::<QuotaLabels, Gauge>::default());
        full.register("vmaas_quota_limit", "Tenants' quota limits by resource (absent: unlimited)", quota_limit.clone());
        full.register("vmaas_quota_usage", "What tenants with a quota hold, by resource", quota_usage.clone());
        let (vm_resident, vm_unique) = (Family::<VmLabels, Gauge>::default(), Family::<VmLabels, Gauge>::default());
        full.register(
            "vmaas_vm_memory_resident_bytes",
            "Resident memory of each running VM's process, shared pages included",
            vm_resident.clone(),
        );
        full.register(
            "vmaas_vm_memory_unique_bytes",
            "Memory of each running VM that no other process shares: what the host gets back when it goes",
            vm_unique.clone(),
        );
        for r in [&mut registry, &mut full] {
            r.register("vmaas_http_requests", "HTTP requests served", http_requests.clone());
            r.register("vmaas_http_request_duration_seconds", "HTTP request latency", http_duration.clone());
            r.register("vmaas_reconcile_passes", "Reconcile passes run", reconcile_passes.clone());
            r.register("vmaas_reconcile_backend_errors", "Backend errors seen while reconciling", reconcile_errors.clone());
            r.register("vmaas_reconcile_pass_duration_seconds", "Duration of a reconcile pass", reconcile_duration.clone());
            r.register("vmaas_virtual_machines", "Virtual machines by state, as of the last reconcile pass", vms.clone());
            r.register(
                "vmaas_quarantined_resources",
                "Resources on the host that belong to no stored object (kept, not deleted; see docs/operations.md)",
                quarantined.clone(),
            );
            r.register("vmaas_build_info", "The server's version (always 1)", build_info(env!("CARGO_PKG_VERSION")));
            r.register_collector(Box::new(crate::process_metrics::ProcessCollector));
        }
        Self {
            registry: Mutex::new(registry),
            full: Mutex::new(full),
            http_requests,
            http_duration,
            reconcile_passes,
            reconcile_errors,
            reconcile_duration,
            vms,
            quarantined,
            quota_limit,
            quota_usage,
            vm_resident,
            vm_unique,
        }
    }

    /// Records one HTTP request.
    pub fn observe_http(&self, labels: HttpLabels, elapsed: Duration) {
        self.http_duration.get_or_create(&labels).observe(elapsed.as_secs_f64());
        self.http_requests.get_or_create(&labels).inc();
    }

    /// Records one reconcile pass.
    pub fn observe_pass(&self, elapsed: Duration, errors: usize) {
        self.reconcile_passes.inc();
        self.reconcile_errors.inc_by(errors as u64);
        self.reconcile_duration.observe(elapsed.as_secs_f64());
    }

    /// Sets the number of VMs in each state.
    pub fn set_vm_counts(&self, counts: impl IntoIterator<Item = (&'static str, i64)>) {
        for (state, n) in counts {
            self.vms.get_or_create(&StateLabels { state: state.to_owned() }).set(n);
        }
    }

    /// Sets the number of quarantined resources.
    pub fn set_quarantined(&self, n: usize) {
        self.quarantined.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Replaces the quota figures: `(tenant, resource, limit, usage)`.
    pub fn set_quotas(&self, figures: impl IntoIterator<Item = (String, &'static str, Option<u64>, u64)>) {
        self.quota_limit.clear();
        self.quota_usage.clear();
        let gauge = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        for (tenant, resource, limit, usage) in figures {
            let labels = QuotaLabels { tenant, resource: resource.to_owned() };
            if let Some(l) = limit {
                self.quota_limit.get_or_create(&labels).set(gauge(l));
            }
            self.quota_usage.get_or_create(&labels).set(gauge(usage));
        }
    }

    /// Replaces the VMs' memory figures.
    pub fn set_vm_memory(&self, figures: &[vmaas_backend::VmMemory]) {
        self.vm_resident.clear();
        self.vm_unique.clear();
        let gauge = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        for f in figures {
            let labels = VmLabels { vm: f.id.clone() };
            self.vm_resident.get_or_create(&labels).set(gauge(f.resident_bytes));
            self.vm_unique.get_or_create(&labels).set(gauge(f.unique_bytes));
        }
    }

    /// The metrics in the Prometheus text format: with `tenants`, those
    /// that name a tenant or its VMs too.
    pub fn render(&self, tenants: bool) -> String {
        let mut out = String::new();
        let registry = if tenants { &self.full } else { &self.registry };
        let registry = registry.lock().unwrap_or_else(|p| p.into_inner());
        if prometheus_client::encoding::text::encode(&mut out, &registry).is_err() {
            out.clear();
        }
        out
    }
}
