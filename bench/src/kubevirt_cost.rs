//! What a phase of `vmaas-bench kubevirt` costs the machine (issue 57,
//! goal 3): the requests each API server served, by verb and resource
//! (its `apiserver_request_total`), and the CPU seconds the API servers,
//! the vmaas server and the bench itself spent, so that vmaas's applies
//! and the bare client's are compared by what they asked and took, not
//! only by their rates.

use std::collections::BTreeMap;

use vmaas_tests::k8s::Cluster;

use crate::scale::cpu_seconds_of;

/// The requests served so far, `"VERB resource[/subresource]"` → count,
/// summed over the clusters and every answer code.
pub(crate) type Requests = BTreeMap<String, f64>;

/// What the machine had spent at one moment.
pub(crate) struct Snapshot {
    requests: Requests,
    apiservers: f64,
    server: f64,
    bench: f64,
}

/// What one phase cost: the requests served in it and the CPU seconds spent.
pub(crate) struct Cost {
    pub(crate) requests: Requests,
    pub(crate) apiservers: f64,
    pub(crate) server: f64,
    pub(crate) bench: f64,
}

/// The request counters of one API server's `/metrics` text.
fn parse(metrics: &str, into: &mut Requests) {
    for line in metrics.lines().filter(|l| l.starts_with("apiserver_request_total{")) {
        let Some((labels, value)) = line.strip_prefix("apiserver_request_total{").and_then(|l| l.rsplit_once("} ")) else { continue };
        let label = |name: &str| {
            labels.split("\",").find_map(|kv| kv.strip_prefix(&format!("{name}=\""))).map(|v| v.trim_end_matches('"')).unwrap_or_default()
        };
        let sub = match label("subresource") {
            "" => String::new(),
            s => format!("/{s}"),
        };
        *into.entry(format!("{} {}{sub}", label("verb"), label("resource"))).or_default() += value.trim().parse::<f64>().unwrap_or(0.0);
    }
}

/// What `clusters`, the server `server` (its pid, if it runs) and this process have spent so far.
pub(crate) async fn snapshot(clusters: &[Cluster], server: Option<u32>) -> anyhow::Result<Snapshot> {
    let mut requests = Requests::new();
    let mut apiservers = 0.0;
    for c in clusters {
        parse(&c.text("/metrics").await.1, &mut requests);
        apiservers += cpu_seconds_of(&c.apiserver_pid().to_string())?;
    }
    let server = match server {
        Some(pid) => cpu_seconds_of(&pid.to_string())?,
        None => 0.0,
    };
    Ok(Snapshot { requests, apiservers, server, bench: cpu_seconds_of("self")? })
}

impl Snapshot {
    /// What was spent from `self` until `later`.
    pub(crate) fn until(&self, later: &Snapshot) -> Cost {
        let requests = later
            .requests
            .iter()
            .map(|(k, v)| (k.clone(), v - self.requests.get(k).copied().unwrap_or(0.0)))
            .filter(|(_, d)| *d > 0.0)
            .collect();
        Cost {
            requests,
            apiservers: later.apiservers - self.apiservers,
            server: later.server - self.server,
            bench: later.bench - self.bench,
        }
    }
}

/// Prints, side by side, what vmaas's phase and the bare client's cost per VM.
pub(crate) fn print(label: &str, n: usize, vmaas: &Cost, bare: &Cost) {
    let per = |v: f64| v / n as f64;
    println!("| {label}: per VM applied ({n} VMs) | vmaas | bare client |");
    println!("|---|---|---|");
    let mut keys: Vec<&String> = vmaas.requests.keys().chain(bare.requests.keys()).collect();
    keys.sort();
    keys.dedup();
    for k in keys {
        let of = |c: &Cost| per(c.requests.get(k).copied().unwrap_or(0.0));
        println!("| requests: {k} | {:.2} | {:.2} |", of(vmaas), of(bare));
    }
    let ms = |v: f64| format!("{:.2} ms", per(v) * 1000.0);
    println!("| CPU: kube-apiserver(s) | {} | {} |", ms(vmaas.apiservers), ms(bare.apiservers));
    println!("| CPU: vmaas-server | {} | — |", ms(vmaas.server));
    println!("| CPU: this bench (clients, watches) | {} | {} |", ms(vmaas.bench), ms(bare.bench));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_counters_sum_by_verb_and_resource() {
        let text = "# HELP apiserver_request_total x\n\
            apiserver_request_total{code=\"201\",component=\"apiserver\",dry_run=\"\",group=\"kubevirt.io\",resource=\"virtualmachines\",scope=\"resource\",subresource=\"\",verb=\"APPLY\",version=\"v1\"} 7\n\
            apiserver_request_total{code=\"200\",component=\"apiserver\",dry_run=\"\",group=\"kubevirt.io\",resource=\"virtualmachines\",scope=\"resource\",subresource=\"\",verb=\"APPLY\",version=\"v1\"} 3\n\
            apiserver_request_total{code=\"200\",component=\"apiserver\",dry_run=\"\",group=\"kubevirt.io\",resource=\"virtualmachines\",scope=\"resource\",subresource=\"status\",verb=\"PATCH\",version=\"v1\"} 2\n";
        let mut r = Requests::new();
        parse(text, &mut r);
        assert_eq!(r.get("APPLY virtualmachines"), Some(&10.0));
        assert_eq!(r.get("PATCH virtualmachines/status"), Some(&2.0));
    }
}
