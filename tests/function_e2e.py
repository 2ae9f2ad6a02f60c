"""An independent client of function-vmaas: the RunFunction stubs shipped in
the PyPI package crossplane-function-sdk-python, over gRPC.

    python function_e2e.py ADDRESS CASE_DIR [TLS_DIR]

CASE_DIR holds xr.json, observed.json, input.json, network.json and
physical.json (the examples, converted from YAML; the claims as the XRs
Crossplane makes for them). With TLS_DIR (ca.crt, client.crt,
client.key) the call uses mTLS. Exits non-zero on the first failed check.
"""
import json
import os
import sys

import grpc
from crossplane.function import resource
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1


def load(case, name):
    with open(os.path.join(case, name)) as f:
        return json.load(f)


def check(cond, what):
    if not cond:
        print("FAILED:", what, file=sys.stderr)
        sys.exit(1)


def request(xr, observed, fn_input, tag):
    req = fnv1.RunFunctionRequest(meta=fnv1.RequestMeta(tag=tag))
    req.observed.composite.resource.update(xr)
    for name, obj in observed.get("resources", {}).items():
        req.observed.resources[name].resource.update(obj)
    for name, items in observed.get("required", {}).items():
        for obj in items:
            r = req.required_resources[name].items.add()
            r.resource.update(obj)
    req.input.update(fn_input)
    # Desired state from an earlier pipeline step must be passed through.
    req.desired.resources["earlier-step"].resource.update({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kept"}})
    return req


def main():
    address, case = sys.argv[1], sys.argv[2]
    tls = sys.argv[3] if len(sys.argv) > 3 else None
    if tls:
        def read(n):
            with open(os.path.join(tls, n), "rb") as f:
                return f.read()
        creds = grpc.ssl_channel_credentials(root_certificates=read("ca.crt"), private_key=read("client.key"), certificate_chain=read("client.crt"))
        channel = grpc.secure_channel(address, creds, options=[("grpc.ssl_target_name_override", "localhost")])
    else:
        channel = grpc.insecure_channel(address)
    stub = grpcv1.FunctionRunnerServiceStub(channel)
    xr, observed, fn_input = load(case, "xr.json"), load(case, "observed.json"), load(case, "input.json")

    rsp = stub.RunFunction(request(xr, observed, fn_input, "e2e-1"), timeout=10)
    check(rsp.meta.tag == "e2e-1", "meta.tag is copied")
    check(rsp.meta.ttl.seconds > 0, "meta.ttl is set")
    names = set(rsp.desired.resources.keys())
    check(names == {"namespace", "udn", "vm", "service", "earlier-step"}, f"desired resources: {sorted(names)}")
    ns = resource.struct_to_dict(rsp.desired.resources["namespace"].resource)
    vm_ns = ns["metadata"]["name"]
    check(vm_ns.startswith("vmaas-team-a-myvm-"), f"a namespace of the VM's own, named for its tenant: {vm_ns}")
    check(ns["metadata"]["labels"]["vmaas.io/tenant"] == "team-a", "labelled with its tenant")
    check("k8s.ovn.org/primary-user-defined-network" in ns["metadata"]["labels"], "labelled for its primary UDN")
    for n in ("udn", "vm", "service"):
        meta = resource.struct_to_dict(rsp.desired.resources[n].resource)["metadata"]
        check(meta["namespace"] == vm_ns, f"{n} is in the VM's namespace: {meta}")
    vm = resource.struct_to_dict(rsp.desired.resources["vm"].resource)
    check(vm["apiVersion"] == "kubevirt.io/v1" and vm["kind"] == "VirtualMachine", "a KubeVirt VM")
    check(vm["spec"]["runStrategy"] == "Always", "runStrategy from state")
    check(vm["spec"]["template"]["spec"]["domain"]["cpu"]["cores"] == 4, "cores from the parameter")
    check("status" not in vm, "no status on composed resources")
    check(rsp.desired.resources["vm"].ready == fnv1.READY_TRUE, "the running VM is ready")
    check(rsp.desired.resources["service"].ready == fnv1.READY_TRUE, "the Service with an ingress IP is ready")
    svc = resource.struct_to_dict(rsp.desired.resources["service"].resource)
    check(svc["spec"]["type"] == "LoadBalancer", "the floating IP is a LoadBalancer")
    xr_desired = resource.struct_to_dict(rsp.desired.composite.resource)
    check(set(xr_desired.keys()) == {"status"}, f"only the XR status is set: {sorted(xr_desired.keys())}")
    status = xr_desired["status"]
    check(status["state"] == "READY", f"state READY: {status['state']}")
    check("conditions" not in status, "conditions are Crossplane's: the function sets its own through the response")
    cond = [c for c in rsp.conditions if c.type == "VirtualMachineReady"]
    check(len(cond) == 1 and cond[0].status == fnv1.STATUS_CONDITION_TRUE and cond[0].reason, f"the VirtualMachineReady condition: {cond}")
    check(status["internalIP"] == "10.200.0.5", "internalIP: the VM's address on its network, from the VMI")
    check(status["namespace"] == vm_ns, "the XR says where its VM lives")
    nic = vm["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"][0]
    check(nic == {"name": "default", "binding": {"name": "l2bridge"}, "model": "virtio"}, f"bridged onto the primary UDN: {nic}")
    check(status["externalIP"] == "193.1.2.3", "externalIP from the LoadBalancer")
    check(all(r.severity == fnv1.SEVERITY_NORMAL for r in rsp.results), "normal results only")
    sel = rsp.requirements.resources["vmi"]
    check(sel.kind == "VirtualMachineInstance" and sel.match_name == "myvm" and sel.namespace == vm_ns, "the VMI is required")

    bad = json.loads(json.dumps(xr))
    bad["spec"]["templateParameters"]["vm_memory"] = {"value": "4GB"}
    rsp = stub.RunFunction(request(bad, {}, fn_input, "e2e-2"), timeout=10)
    fatal = [r for r in rsp.results if r.severity == fnv1.SEVERITY_FATAL]
    check(len(fatal) == 1, "one fatal result for a bad parameter")
    check("spec.templateParameters.vm_memory.value" in fatal[0].message and "GB" in fatal[0].message, fatal[0].message)

    def fatal_of(obj, tag, observed=None, extra=None):
        req = request(obj, observed or {}, fn_input, tag)
        for name, items in (extra or {}).items():
            for o in items:
                req.required_resources[name].items.add().resource.update(o)
        rsp = stub.RunFunction(req, timeout=10)
        fatal = [r for r in rsp.results if r.severity == fnv1.SEVERITY_FATAL]
        composed = set(rsp.desired.resources.keys()) - {"earlier-step"}
        return fatal, composed

    longest = json.loads(json.dumps(xr))
    longest["metadata"]["name"] = "v" * 63
    longest["metadata"]["labels"]["crossplane.io/claim-name"] = "v" * 63
    rsp = stub.RunFunction(request(longest, {}, fn_input, "e2e-4"), timeout=10)
    check(not [r for r in rsp.results if r.severity == fnv1.SEVERITY_FATAL], "a 63-character name composes")
    for n, r in rsp.desired.resources.items():
        name = resource.struct_to_dict(r.resource)["metadata"]["name"]
        check(len(name) <= 63, f"{n} is named within 63 characters: {name}")

    too_long = json.loads(json.dumps(xr))
    too_long["metadata"]["name"] = "v" * 64
    fatal, composed = fatal_of(too_long, "e2e-5")
    check(len(fatal) == 1 and "metadata.name" in fatal[0].message and "63" in fatal[0].message, f"an over-long name: {fatal}")
    check(not composed, f"nothing composed for a bad XR: {composed}")

    unknown = json.loads(json.dumps(xr))
    unknown["spec"]["template"] = "no_such_template"
    fatal, composed = fatal_of(unknown, "e2e-6")
    check(len(fatal) == 1 and "spec.template" in fatal[0].message and "no_such_template" in fatal[0].message, f"an unknown template: {fatal}")
    check(not composed, f"nothing composed for an unknown template: {composed}")

    physical = load(case, "physical.json")
    elsewhere = json.loads(json.dumps(xr))
    elsewhere["metadata"]["labels"]["crossplane.io/claim-namespace"] = "team-b"
    elsewhere["spec"]["physicalNetwork"] = physical["metadata"]["name"]
    fatal, composed = fatal_of(elsewhere, "e2e-7", extra={"physical-network": [physical]})
    check(len(fatal) == 1 and "spec.physicalNetwork" in fatal[0].message and "team-b" in fatal[0].message, f"a network not offered: {fatal}")
    check(not composed, f"nothing composed on a network not offered: {composed}")

    net = load(case, "network.json")
    rsp = stub.RunFunction(request(net, {}, fn_input, "e2e-3"), timeout=10)
    check(set(rsp.desired.resources.keys()) == {"namespace", "udn", "earlier-step"}, f"a network: {rsp.desired.resources.keys()}")
    udn = resource.struct_to_dict(rsp.desired.resources["udn"].resource)
    check(udn["kind"] == "UserDefinedNetwork" and udn["spec"]["layer2"]["subnets"] == ["192.168.100.0/24"], "the private network's UDN")
    check(udn["spec"]["layer2"]["role"] == "Primary", "a primary UDN")
    net_ns = resource.struct_to_dict(rsp.desired.resources["namespace"].resource)["metadata"]["name"]
    check(udn["metadata"] == {"name": "example", "namespace": net_ns}, f"in the network's namespace: {udn['metadata']}")

    # Seed 001's load balancer over two web VMs of that network: a Service in
    # the network's namespace selecting its own label; web-1's VMI serves.
    lb = load(case, "loadbalancer.json")
    hosts = []
    for name in ("web-1", "web-2"):
        h = json.loads(json.dumps(xr))
        h["metadata"]["name"] = name + "-x7k2p"
        h["metadata"]["labels"]["crossplane.io/claim-name"] = name
        h["spec"]["network"] = "example"
        hosts.append(h)
    vmi = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
           "metadata": {"name": "web-1", "namespace": net_ns, "labels": {"lb.vmaas.io/example": "true"}},
           "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    rsp = stub.RunFunction(request(lb, {"required": {"hosts": hosts, "vmis": [vmi]}}, fn_input, "e2e-9"), timeout=10)
    svc = resource.struct_to_dict(rsp.desired.resources["service"].resource)
    check(svc["kind"] == "Service" and svc["metadata"]["namespace"] == net_ns, f"the load balancer's Service: {svc['metadata']}")
    check(svc["spec"]["selector"] == {"lb.vmaas.io/example": "true"}, f"its selector: {svc['spec']}")
    check(svc["spec"]["ports"][0]["port"] == 80 and svc["spec"]["ports"][0]["targetPort"] == 8080, f"its ports: {svc['spec']['ports']}")
    status = resource.struct_to_dict(rsp.desired.composite.resource)["status"]
    check(status["healthyTargets"] == ["web-1"] and "web-2: not running" in status["message"], f"the load balancer's status: {status}")
    rsp = stub.RunFunction(request(hosts[0], {"required": {"balancers": [lb], "network": [net]}}, fn_input, "e2e-10"), timeout=10)
    web = resource.struct_to_dict(rsp.desired.resources["vm"].resource)
    check(web["spec"]["template"]["metadata"]["labels"].get("lb.vmaas.io/example") == "true", "a host carries the label")
    usage = resource.struct_to_dict(rsp.desired.resources["usage"].resource)
    check(usage["kind"] == "ClusterUsage" and usage["spec"]["of"]["resourceRef"]["name"] == net["metadata"]["name"], f"the host uses its network: {usage}")

    rsp = stub.RunFunction(request(physical, {}, fn_input, "e2e-8"), timeout=10)
    cudn = resource.struct_to_dict(rsp.desired.resources["cudn"].resource)
    check(cudn["kind"] == "ClusterUserDefinedNetwork" and "namespace" not in cudn["metadata"], "a cluster-scoped CUDN")
    check(cudn["spec"]["network"]["localnet"]["vlan"] == {"mode": "Access", "access": {"id": 120}}, f"the VLAN: {cudn['spec']}")
    print("ok")


if __name__ == "__main__":
    main()
