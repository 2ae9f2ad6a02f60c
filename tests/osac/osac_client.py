#!/usr/bin/env python3
"""An OSAC client generated from OSAC's own .proto files, driving vmaas-server.

Compiles ../shared/osac (fulfillment-v1 and public-v1) with grpcio-tools,
dropping only the grpc-gateway OpenAPI and buf.validate options (they do not
change the wire), then, over gRPC on the server's one port:

  reflection lists the services; an administrator creates a template
  (fulfillment.v1) and a tenant lists it; the tenant creates a VM from the
  seed's example (template_parameters as google.protobuf.Any), watches it to
  RUNNING on osac.public.v1 Events, reads it back through fulfillment.v1,
  checks a rich error, and deletes it. (OSAC's current compute instances,
  with typed references, are compute_client.py's: this client's public-v1
  is the August 2026 one, whose ComputeInstance and references the
  server no longer speaks on gRPC; networks are compute_client.py's too.)

Then the same through grpc-gateway-style REST JSON: bare bodies and Any
values, answered bare and in the Any form sent. Prints one line per step;
exits non-zero at the first thing that is not as it should be.
"""

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.request


def strip_options(text):
    """The .proto text without buf.validate / openapiv2 imports and options."""
    text = re.sub(r'^import "(buf/validate|protoc-gen-openapiv2)/[^"]*";\n', "", text, flags=re.M)
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":  # a string: copy it whole
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):  # a comment: drop it
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("option (", i) and re.match(r"option \((buf\.validate|grpc\.gateway)", text[i:]):
            i = skip(text, i, ";") + 1
        elif c == "[":
            j = skip(text, i + 1, "]")
            inner = text[i:j + 1]
            if "buf.validate" not in inner and "openapiv2" not in inner:
                out.append(inner)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def skip(text, i, end):
    """The index of `end` after i, at bracket depth 0, outside strings."""
    depth = 0
    while i < len(text):
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < len(text) and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if c == end and depth == 0:
            return i
        if c in "{[(":
            depth += 1
        elif c in "}])":
            depth -= 1
        i += 1
    raise ValueError("unbalanced .proto text")


def compile_osac(shared, out, roots=None):
    """Generates the Python modules of OSAC's protocol into `out`: the files
    under each root (relative to `shared`) whose path starts with one of its
    prefixes; by default fulfillment-v1's VMs and all of public-v1."""
    from grpc_tools import protoc
    import grpc_tools
    import google.api.annotations_pb2 as annotations
    src = os.path.join(out, "src")
    roots = roots or {
        "osac/fulfillment-v1/proto": ["fulfillment/v1/virtual_machine", "shared/v1/"],
        "osac/public-v1/proto/public": ["osac/public/v1/"],
    }
    roots = {os.path.join(shared, root): prefixes for root, prefixes in roots.items()}
    files = []
    for root, prefixes in roots.items():
        for dirpath, _, names in os.walk(root):
            for name in names:
                rel = os.path.relpath(os.path.join(dirpath, name), root)
                if name.endswith(".proto") and any(rel.startswith(p) for p in prefixes):
                    os.makedirs(os.path.dirname(os.path.join(src, rel)), exist_ok=True)
                    with open(os.path.join(dirpath, name)) as f:
                        text = strip_options(f.read())
                    with open(os.path.join(src, rel), "w") as f:
                        f.write(text)
                    files.append(rel)
    wkt = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    googleapis = os.path.dirname(os.path.dirname(os.path.dirname(annotations.__file__)))
    args = ["protoc", f"-I{src}", f"-I{wkt}", f"-I{googleapis}", f"--python_out={out}", f"--grpc_python_out={out}"] + files
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed on OSAC's .proto files")
    sys.path.insert(0, out)


def with_stubs(shared, roots, what, run):
    """Compiles `roots` of `shared` (as compile_osac) into a temporary
    directory, says so as the step "compiled WHAT with grpcio-tools", runs
    `run()`, and removes the directory."""
    out = tempfile.mkdtemp(prefix="osac-py-")
    try:
        compile_osac(shared, out, roots)
        step(f"compiled {what} with grpcio-tools")
        run()
    finally:
        shutil.rmtree(out, ignore_errors=True)


def server_args():
    """A parser of what every client is given: the server's gRPC and HTTP
    addresses, the directory of OSAC's protos, and a tenant's token."""
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--grpc", required=True, help="host:port")
    ap.add_argument("--http", required=True, help="http://host:port")
    ap.add_argument("--shared", required=True)
    ap.add_argument("--token", required=True)
    return ap


def step(text):
    print(f"ok: {text}", flush=True)


def check(cond, what):
    if not cond:
        raise SystemExit(f"FAILED: {what}")


def until_gone(read, what, seconds):
    """Calls read() until it answers NOT_FOUND (any other error fails), within seconds."""
    import grpc
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            read()
            time.sleep(0.2)
        except grpc.RpcError as e:
            check(e.code() == grpc.StatusCode.NOT_FOUND, f"{what} gone: NOT_FOUND ({e.code()})")
            return
    check(False, f"{what} is gone within {seconds} s of its delete")


def rest(endpoint, method, path, token, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(endpoint + path, data=data, method=method)
    req.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as rsp:
            return rsp.status, json.loads(rsp.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grpc", required=True, help="host:port")
    ap.add_argument("--http", required=True, help="http://host:port")
    ap.add_argument("--token", required=True)
    ap.add_argument("--admin-token", required=True)
    ap.add_argument("--other-token", required=True, help="another tenant's")
    ap.add_argument("--shared", required=True)
    ap.add_argument("--name", default="osac-vm")
    a = ap.parse_args()

    out = tempfile.mkdtemp(prefix="osac-py-")
    try:
        compile_osac(a.shared, out)
        step("compiled OSAC's .proto files with grpcio-tools")
        run(a)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def run(a):
    import grpc
    from google.protobuf import any_pb2, wrappers_pb2
    from google.rpc import status_pb2, error_details_pb2
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
    from fulfillment.v1 import virtual_machine_type_pb2 as vmt, virtual_machines_service_pb2 as vms, virtual_machines_service_pb2_grpc as vms_grpc
    from fulfillment.v1 import virtual_machine_template_type_pb2 as tt, virtual_machine_templates_service_pb2 as ts
    from fulfillment.v1 import virtual_machine_templates_service_pb2_grpc as ts_grpc
    from osac.public.v1 import compute_instance_type_pb2 as cit, events_service_pb2 as evs, events_service_pb2_grpc as evs_grpc
    from osac.public.v1 import event_type_pb2 as evt

    def wrap(msg):
        any_ = any_pb2.Any()
        any_.Pack(msg)
        return any_

    ch = grpc.insecure_channel(a.grpc)
    grpc.channel_ready_future(ch).result(timeout=20)
    user = [("authorization", f"Bearer {a.token}")]
    admin = [("authorization", f"Bearer {a.admin_token}")]

    refl = reflection_pb2_grpc.ServerReflectionStub(ch)
    answers = refl.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10)
    names = {s.name for r in answers for s in r.list_services_response.service}
    for want in ["fulfillment.v1.VirtualMachines", "fulfillment.v1.VirtualMachineTemplates", "osac.public.v1.ComputeInstances",
                 "osac.public.v1.Events", "osac.public.v1.ComputeInstanceTemplates", "osac.public.v1.VirtualNetworks", "osac.public.v1.Subnets", "grpc.health.v1.Health"]:
        check(want in names, f"reflection lists {want} (got {sorted(names)})")
    step(f"reflection lists {len(names)} services")
    # grpc.health.v1.Health/Check{service} -> {status: SERVING (1)}, encoded by hand.
    check_health = ch.unary_unary("/grpc.health.v1.Health/Check", request_serializer=None, response_deserializer=None)
    for service in ["", "fulfillment.v1.VirtualMachines", "osac.public.v1.ComputeInstances"]:
        raw = service.encode()
        answer = check_health((b"\x0a" + bytes([len(raw)]) + raw) if raw else b"", timeout=10)
        check(answer == b"\x08\x01", f"health of {service or 'the server'} is SERVING ({answer!r})")
    step("health: SERVING")

    templates = ts_grpc.VirtualMachineTemplatesStub(ch)
    tid = f"{a.name}-tpl"
    tpl = tt.VirtualMachineTemplate(id=tid, title="OSAC small", description="made by OSAC's own client", parameters=[
        tt.VirtualMachineTemplateParameterDefinition(name="vm_cpu_cores", type="type.googleapis.com/google.protobuf.Int32Value",
                                                     default=wrap(wrappers_pb2.Int32Value(value=1))),
        tt.VirtualMachineTemplateParameterDefinition(name="vm_memory", type="type.googleapis.com/google.protobuf.StringValue",
                                                     default=wrap(wrappers_pb2.StringValue(value="256Mi"))),
    ])
    made = templates.Create(ts.VirtualMachineTemplatesCreateRequest(object=tpl), metadata=admin, timeout=30).object
    check(made.id == tid and len(made.parameters) == 2, f"template created ({made})")
    try:
        templates.Create(ts.VirtualMachineTemplatesCreateRequest(object=tpl), metadata=user, timeout=30)
        check(False, "a tenant cannot publish templates")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.PERMISSION_DENIED, f"a tenant publishing gets PERMISSION_DENIED ({e.code()})")
    listed = templates.List(ts.VirtualMachineTemplatesListRequest(filter=f"this.id == '{tid}'"), metadata=user, timeout=30)
    check([t.id for t in listed.items] == [tid] and listed.total == 1, f"the tenant lists the template by filter ({listed})")
    from google.protobuf import field_mask_pb2
    retitle = tt.VirtualMachineTemplate(id=tid, title="OSAC small, retitled", description="ignored-by-the-mask")
    mask = field_mask_pb2.FieldMask(paths=["title"])
    retitled = templates.Update(ts.VirtualMachineTemplatesUpdateRequest(object=retitle, update_mask=mask), metadata=admin, timeout=30).object
    check(retitled.title == "OSAC small, retitled" and retitled.description == "made by OSAC's own client"
          and [p.name for p in retitled.parameters] == ["vm_cpu_cores", "vm_memory"], f"retitled, the rest kept ({retitled})")
    try:
        bad = tt.VirtualMachineTemplate(id=tid, parameters=[tt.VirtualMachineTemplateParameterDefinition(name="vm_memory", type="colour")])
        templates.Update(ts.VirtualMachineTemplatesUpdateRequest(object=bad, update_mask=field_mask_pb2.FieldMask(paths=["parameters"])),
                         metadata=admin, timeout=30)
        check(False, "a parameter of an unknown type is refused")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.INVALID_ARGUMENT and "parameters[0].type" in e.details(), f"names the type ({e.details()})")
    step("template created by an administrator, retitled with an update mask, listed by the tenant with a CEL filter")
    public_templates(a, ch, tid, admin, user)

    machines = vms_grpc.VirtualMachinesStub(ch)
    # The seed's example, as OSAC's client sends it: parameters as Any.
    vm = vmt.VirtualMachine(id=a.name, spec=vmt.VirtualMachineSpec(template=tid, template_parameters={
        "vm_cpu_cores": wrap(wrappers_pb2.Int32Value(value=1)),
        "vm_memory": wrap(wrappers_pb2.StringValue(value="256Mi")),
    }))
    # Watch from before the create, so that no event is missed.
    events = evs_grpc.EventsStub(ch)
    created = machines.Create(vms.VirtualMachinesCreateRequest(object=vm), metadata=user, timeout=60).object
    check(created.metadata.name == a.name and created.id != a.name, f"VM created with a server id ({created.id})")
    params = created.spec.template_parameters
    cores = wrappers_pb2.Int32Value()
    check(params["vm_cpu_cores"].Unpack(cores) and cores.value == 1, "the parameter comes back as the Any sent")
    step(f"VM {created.id} created from the seed's example")

    stranger = [("authorization", f"Bearer {a.other_token}")]
    try:
        machines.Get(vms.VirtualMachinesGetRequest(id=created.id), metadata=stranger, timeout=30)
        check(False, "another tenant cannot read the VM")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.NOT_FOUND, f"another tenant gets NOT_FOUND ({e.code()})")
    theirs = machines.List(vms.VirtualMachinesListRequest(), metadata=stranger, timeout=30)
    check(len(theirs.items) == 0 and theirs.total == 0, f"another tenant lists nothing ({theirs})")
    try:
        machines.Get(vms.VirtualMachinesGetRequest(id=created.id), timeout=30)
        check(False, "no token, no answer")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.UNAUTHENTICATED, f"no token: UNAUTHENTICATED ({e.code()})")
    got = []
    try:
        for r in events.Watch(evs.EventsWatchRequest(), metadata=stranger + [("last-event-id", "0")], timeout=3):
            got.append(r.event)
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, f"the stranger's watch just waits ({e.code()}: {e.details()})")
    check(not any(ev.compute_instance.id == created.id for ev in got), "another tenant's watch never carries the VM")
    step("another tenant sees nothing of it, not even on the event stream; no token is UNAUTHENTICATED")

    try:
        machines.Create(vms.VirtualMachinesCreateRequest(object=vm), metadata=user, timeout=30)
        check(False, "a second VM of the same name is refused")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.ALREADY_EXISTS, f"same name: ALREADY_EXISTS ({e.code()}: {e.details()})")
    bad = vmt.VirtualMachine(id=f"{a.name}-bad", spec=vmt.VirtualMachineSpec(template=tid, template_parameters={
        "vm_cpu_cores": wrap(wrappers_pb2.StringValue(value="many"))}))
    try:
        machines.Create(vms.VirtualMachinesCreateRequest(object=bad), metadata=user, timeout=30)
        check(False, "a bad parameter is refused")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.INVALID_ARGUMENT, f"bad parameter: INVALID_ARGUMENT ({e.code()})")
        rich = dict(e.trailing_metadata()).get("grpc-status-details-bin")
        check(rich is not None, "the error carries grpc-status-details-bin")
        st = status_pb2.Status.FromString(rich)
        br = error_details_pb2.BadRequest()
        check(st.details and st.details[0].Unpack(br), f"the detail is a BadRequest ({st})")
        fields = [v.field for v in br.field_violations]
        check(any("vm_cpu_cores" in f for f in fields), f"the violation names the parameter ({fields})")
    step("duplicate name and bad parameter refused with the right codes and a BadRequest detail")

    def watch_until(state, after=None, within=240):
        flt = f"event.compute_instance.id == '{created.id}'"
        req = evs.EventsWatchRequest(filter=flt)
        md = list(user) + ([("last-event-id", after)] if after else [])
        stream = events.Watch(req, metadata=md, timeout=within)
        seen = []
        try:
            for r in stream:
                ci = r.event.compute_instance
                check(ci.id == created.id, f"the filter holds ({r.event})")
                seen.append(cit.ComputeInstanceState.Name(ci.status.state))
                if ci.status.state == state:
                    stream.cancel()
                    return r.event, seen
        except grpc.RpcError as e:
            raise SystemExit(f"FAILED: watching for {cit.ComputeInstanceState.Name(state)}: {e.code()} {e.details()} (saw {seen})")
        raise SystemExit(f"FAILED: the stream ended before {state} (saw {seen})")

    ev, seen = watch_until(cit.COMPUTE_INSTANCE_STATE_RUNNING, after="0")
    check(ev.type in (evt.EVENT_TYPE_OBJECT_CREATED, evt.EVENT_TYPE_OBJECT_UPDATED), "a created or updated event")
    step(f"watched it to RUNNING on osac.public.v1 Events (states seen: {seen})")

    got = machines.Get(vms.VirtualMachinesGetRequest(id=created.id), metadata=user, timeout=30).object
    check(got.status.state == vmt.VIRTUAL_MACHINE_STATE_READY, f"fulfillment.v1 shows READY ({got.status})")
    check(got.status.ip_address != "", "fulfillment.v1 shows its address")
    listed = machines.List(vms.VirtualMachinesListRequest(filter=f"this.metadata.name == '{a.name}'"), metadata=user, timeout=30)
    check([m.id for m in listed.items] == [created.id], f"fulfillment.v1 List with a filter finds it ({listed})")
    step(f"fulfillment.v1 reads it READY at {got.status.ip_address}")

    machines.Delete(vms.VirtualMachinesDeleteRequest(id=created.id), metadata=user, timeout=60)
    until_gone(lambda: machines.Get(vms.VirtualMachinesGetRequest(id=created.id), metadata=user, timeout=10), "the VM", 120)
    step("deleted; Get answers NOT_FOUND")

    gateway_json(a, tid)
    templates.Delete(ts.VirtualMachineTemplatesDeleteRequest(id=tid), metadata=admin, timeout=30)
    step("template deleted")


def public_templates(a, ch, tid, admin, user):
    """The same templates through osac.public.v1.ComputeInstanceTemplates."""
    import grpc
    from osac.public.v1 import compute_instance_template_type_pb2 as citt, compute_instance_templates_service_pb2 as cits
    from osac.public.v1 import compute_instance_templates_service_pb2_grpc as cits_grpc, compute_instance_type_pb2 as cit
    stub = cits_grpc.ComputeInstanceTemplatesStub(ch)
    seen = stub.Get(cits.ComputeInstanceTemplatesGetRequest(id=tid), metadata=user, timeout=30).object
    check(seen.id == tid and seen.metadata.name == tid and [p.name for p in seen.parameters] == ["vm_cpu_cores", "vm_memory"],
          f"the fulfillment.v1 template read as a compute instance template ({seen})")
    made = citt.ComputeInstanceTemplate(metadata={"name": f"{tid}-public"}, title="public view",
        spec_defaults=citt.ComputeInstanceTemplateSpecDefaults(boot_disk=cit.ComputeInstanceDisk(size_gib=2)))
    got = stub.Create(cits.ComputeInstanceTemplatesCreateRequest(object=made), metadata=admin, timeout=30).object
    check(got.id == f"{tid}-public" and got.spec_defaults.boot_disk.size_gib == 2, f"created through the view ({got})")
    code, t = rest(a.http, "GET", f"/api/fulfillment/v1/virtual_machine_templates/{tid}-public", a.token)
    check(code == 200 and t["object"]["spec_defaults"]["disk_size"] == "2Gi", f"the same template, disk_size 2Gi ({t})")
    stub.Delete(cits.ComputeInstanceTemplatesDeleteRequest(id=f"{tid}-public"), metadata=admin, timeout=30)
    step("osac.public.v1 ComputeInstanceTemplates: the same templates, boot_disk as disk_size")


def gateway_json(a, tid):
    """The same kind of requests as grpc-gateway JSON: bare bodies, Any values."""
    body = {"metadata": {"name": f"{a.name}-json"}, "spec": {"template": tid, "run_strategy": "Halted", "template_parameters": {
        "vm_cpu_cores": {"@type": "type.googleapis.com/google.protobuf.Int32Value", "value": 1}}}}
    code, made = rest(a.http, "POST", "/api/fulfillment/v1/compute_instances", a.token, body)
    check(code == 201, f"bare compute instance created ({code} {made})")
    check("object" not in made and made["spec"]["run_strategy"] == "Halted", f"answered bare, in the view ({made})")
    check(made["spec"]["template_parameters"]["vm_cpu_cores"]["@type"].endswith("Int32Value"), "the Any comes back as sent")
    code, got = rest(a.http, "GET", f"/api/fulfillment/v1/virtual_machines/{made['id']}", a.token)
    check(code == 200 and got["object"]["spec"]["state"] == "stopped", f"the same object as a VM ({got})")
    code, err = rest(a.http, "POST", "/api/fulfillment/v1/compute_instances", a.token,
                     {"metadata": {"name": "x"}, "spec": {"template": tid, "is_windows": True}})
    check(code == 400 and err["details"][0]["field"] == "object.spec.is_windows", f"unsupported field named ({err})")
    code, _ = rest(a.http, "DELETE", f"/api/fulfillment/v1/compute_instances/{made['id']}", a.token)
    check(code == 202, f"deleted through the view ({code})")
    deadline = time.monotonic() + 120
    while rest(a.http, "GET", f"/api/fulfillment/v1/compute_instances/{made['id']}", a.token)[0] != 404:
        check(time.monotonic() < deadline, "the compute instance is gone within 120 s")
        time.sleep(0.5)
    step("grpc-gateway JSON: bare bodies and Any values on compute_instances, answered bare")


if __name__ == "__main__":
    main()
