"""An independent client of function-vmaas: the RunFunction stubs shipped in
the PyPI package crossplane-function-sdk-python, over gRPC.

    python function_e2e.py ADDRESS CASE_DIR [TLS_DIR]

CASE_DIR holds xr.json, observed.json, input.json and network.json (the
examples, converted from YAML). With TLS_DIR (ca.crt, client.crt,
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
    check({"namespace", "udn", "vm", "service", "earlier-step"} <= names, f"desired resources: {sorted(names)}")
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
    check(status["internalIP"] == "10.200.0.5", "internalIP from the VMI")
    check(status["externalIP"] == "193.1.2.3", "externalIP from the LoadBalancer")
    check(all(r.severity == fnv1.SEVERITY_NORMAL for r in rsp.results), "normal results only")
    sel = rsp.requirements.resources["vmi"]
    check(sel.kind == "VirtualMachineInstance" and sel.match_name == "myvm" and sel.namespace == "vmaas-myvm", "the VMI is required")

    bad = json.loads(json.dumps(xr))
    bad["spec"]["templateParameters"]["vm_memory"] = {"value": "4GB"}
    rsp = stub.RunFunction(request(bad, {}, fn_input, "e2e-2"), timeout=10)
    fatal = [r for r in rsp.results if r.severity == fnv1.SEVERITY_FATAL]
    check(len(fatal) == 1, "one fatal result for a bad parameter")
    check("spec.templateParameters.vm_memory.value" in fatal[0].message and "GB" in fatal[0].message, fatal[0].message)

    long = json.loads(json.dumps(xr))
    long["metadata"]["name"] = "v" * 60
    rsp = stub.RunFunction(request(long, {}, fn_input, "e2e-4"), timeout=10)
    fatal = [r for r in rsp.results if r.severity == fnv1.SEVERITY_FATAL]
    check(len(fatal) == 1 and "metadata.name" in fatal[0].message and "63" in fatal[0].message, f"an over-long name: {fatal}")
    check(not any(k in rsp.desired.resources for k in ("vm", "namespace", "service")), "nothing composed for a bad XR")

    net = load(case, "network.json")
    rsp = stub.RunFunction(request(net, {}, fn_input, "e2e-3"), timeout=10)
    udn = resource.struct_to_dict(rsp.desired.resources["udn"].resource)
    check(udn["kind"] == "UserDefinedNetwork" and udn["spec"]["layer2"]["subnets"] == ["192.168.100.0/24"], "the private network's UDN")
    ns = resource.struct_to_dict(rsp.desired.resources["namespace"].resource)
    check("k8s.ovn.org/primary-user-defined-network" in ns["metadata"]["labels"], "the namespace is labelled")
    print("ok")


if __name__ == "__main__":
    main()
