#!/usr/bin/env python3
"""OSAC's InstanceTypes service as OSAC states it now: Python stubs generated
by grpcio-tools from ../shared/osac/public-v1-latest (not the project's
.proto files), driving vmaas-server over gRPC on its one port.

An administrator publishes two instance types (one with a GPU); a tenant
lists them, with a CEL filter too, and reads one; a tenant's create is
PERMISSION_DENIED; a create without cores is INVALID_ARGUMENT with a
BadRequest naming the field; the administrator deprecates one with a typed
replacement through an update mask (the server answers with the
replacement's id and name and the time), makes it obsolete, and deletes it;
then the list through grpc-gateway JSON carries the same reference. Prints
one line per step; exits non-zero at the first thing that is not as it
should be.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from osac_client import check, rest, server_args, step, with_stubs  # noqa: E402

LATEST = {"osac/public-v1-latest/proto/public": ["osac/public/v1/instance_type", "osac/public/v1/metadata_type"]}


def main():
    ap = server_args()
    ap.add_argument("--admin-token", required=True)
    a = ap.parse_args()
    with_stubs(a.shared, LATEST, "public-v1-latest's instance types", lambda: run(a))


def refused(call, code, what):
    """Runs `call`, which must fail with `code`; the error."""
    import grpc
    try:
        call()
    except grpc.RpcError as e:
        check(e.code() == code, f"{what}: {e.code()} {e.details()}")
        return e
    raise SystemExit(f"FAILED: {what}: it succeeded")


def run(a):
    import grpc
    from google.protobuf import field_mask_pb2
    from google.rpc import error_details_pb2, status_pb2
    from osac.public.v1 import instance_type_type_pb2 as it, instance_types_service_pb2 as its
    from osac.public.v1 import instance_types_service_pb2_grpc as its_grpc

    ch = grpc.insecure_channel(a.grpc)
    grpc.channel_ready_future(ch).result(timeout=20)
    stub = its_grpc.InstanceTypesStub(ch)
    user, admin = [("authorization", f"Bearer {a.token}")], [("authorization", f"Bearer {a.admin_token}")]

    def publish(name, cores, gib, gpu=None, who=admin):
        obj = it.InstanceType(spec=it.InstanceTypeSpec(cores=cores, memory_gib=gib, description=f"{name}, for tests"))
        obj.metadata.name = name
        if gpu:
            obj.spec.gpu.CopyFrom(gpu)
        return stub.Create(its.InstanceTypesCreateRequest(object=obj), metadata=who, timeout=30).object

    small = publish("general-small", 1, 2)
    gpu = it.GpuSpec(pci_device_selector="10DE:20B0", resource_name="nvidia.com/A100", count=1)
    large = publish("gpu-large", 8, 32, gpu)
    check(small.id and small.metadata.name == "general-small", f"created ({small})")
    check(small.spec.state == it.INSTANCE_TYPE_STATE_ACTIVE and not small.spec.HasField("deprecation"), f"ACTIVE by default ({small})")
    check(large.spec.HasField("gpu") and large.spec.gpu.count == 1 and large.spec.gpu.resource_name == "nvidia.com/A100", f"the GPU ({large})")
    step("an administrator published two instance types, one with a GPU")

    listed = stub.List(its.InstanceTypesListRequest(), metadata=user, timeout=30)
    names = sorted(i.metadata.name for i in listed.items)
    check(names == ["general-small", "gpu-large"] and listed.total == 2 and listed.size == 2, f"the tenant lists both ({listed})")
    big = stub.List(its.InstanceTypesListRequest(filter="this.spec.cores >= 4"), metadata=user, timeout=30)
    check([i.id for i in big.items] == [large.id], f"filtered ({big})")
    got = stub.Get(its.InstanceTypesGetRequest(id=small.id), metadata=user, timeout=30).object
    check(got.spec.cores == 1 and got.spec.memory_gib == 2 and got.metadata.name == "general-small", f"read ({got})")
    step("a tenant lists them, with a CEL filter, and reads one")

    refused(lambda: publish("mine", 2, 2, who=user), grpc.StatusCode.PERMISSION_DENIED, "a tenant creating an instance type")
    step("a tenant creating an instance type is PERMISSION_DENIED")

    e = refused(lambda: publish("coreless", 0, 2), grpc.StatusCode.INVALID_ARGUMENT, "an instance type without cores")
    rich = dict(e.trailing_metadata()).get("grpc-status-details-bin")
    check(rich is not None, "the error carries grpc-status-details-bin")
    br = error_details_pb2.BadRequest()
    st = status_pb2.Status.FromString(rich)
    check(st.details and st.details[0].Unpack(br), f"the detail is a BadRequest ({st})")
    fields = [v.field for v in br.field_violations]
    check(fields == ["object.spec.cores"], f"the violation names spec.cores ({fields})")
    step("an instance type without cores is INVALID_ARGUMENT naming object.spec.cores")

    dep = it.InstanceType(id=small.id, spec=it.InstanceTypeSpec(state=it.INSTANCE_TYPE_STATE_DEPRECATED))
    dep.spec.deprecation.replacement.name = "gpu-large"
    mask = field_mask_pb2.FieldMask(paths=["spec.state", "spec.deprecation.replacement"])
    refused(lambda: stub.Update(its.InstanceTypesUpdateRequest(object=dep, update_mask=mask), metadata=user, timeout=30),
            grpc.StatusCode.PERMISSION_DENIED, "a tenant deprecating an instance type")
    done = stub.Update(its.InstanceTypesUpdateRequest(object=dep, update_mask=mask), metadata=admin, timeout=30).object
    d = done.spec.deprecation
    check(done.spec.state == it.INSTANCE_TYPE_STATE_DEPRECATED and d.state == it.INSTANCE_TYPE_STATE_DEPRECATED, f"deprecated ({done})")
    check(d.replacement.id == large.id and d.replacement.name == "gpu-large", f"the replacement by id and name ({d})")
    check(d.deprecation_timestamp.seconds > 0 and d.obsolescence_timestamp.seconds == 0, f"the time it was deprecated ({d})")
    check(done.spec.cores == 1 and done.spec.description == "general-small, for tests", f"the unmasked fields kept ({done})")
    step("deprecated with a typed replacement through an update mask: answered with its id, name and the time")

    bad = it.InstanceType(id=small.id, spec=it.InstanceTypeSpec(state=it.INSTANCE_TYPE_STATE_DEPRECATED))
    bad.spec.deprecation.replacement.name = "no-such-type"
    refused(lambda: stub.Update(its.InstanceTypesUpdateRequest(object=bad, update_mask=mask), metadata=admin, timeout=30),
            grpc.StatusCode.INVALID_ARGUMENT, "a replacement that does not exist")
    obs = it.InstanceType(id=small.id, spec=it.InstanceTypeSpec(state=it.INSTANCE_TYPE_STATE_OBSOLETE))
    gone = stub.Update(its.InstanceTypesUpdateRequest(object=obs, update_mask=field_mask_pb2.FieldMask(paths=["spec.state"])),
                       metadata=admin, timeout=30).object
    check(gone.spec.state == it.INSTANCE_TYPE_STATE_OBSOLETE and gone.spec.deprecation.obsolescence_timestamp.seconds > 0, f"obsolete ({gone})")
    check(gone.spec.deprecation.replacement.id == large.id, f"the replacement kept ({gone})")
    step("an unknown replacement is INVALID_ARGUMENT; made OBSOLETE, with its time and the replacement kept")

    status, body = rest(a.http, "GET", "/api/fulfillment/v1/instance_types?filter=this.metadata.name%20%3D%3D%20%27general-small%27",
                        a.token)
    check(status == 200 and len(body.get("items", [])) == 1, f"gateway JSON list ({status} {body})")
    ref = body["items"][0]["spec"]["deprecation"]["replacement"]
    check(ref == {"id": large.id, "name": "gpu-large"}, f"the replacement in JSON is a reference ({ref})")
    step("grpc-gateway JSON: the replacement is {id, name}")

    for t in (small, large):
        stub.Delete(its.InstanceTypesDeleteRequest(id=t.id), metadata=admin, timeout=30)
    refused(lambda: stub.Get(its.InstanceTypesGetRequest(id=small.id), metadata=user, timeout=30),
            grpc.StatusCode.NOT_FOUND, "a deleted instance type")
    step("deleted; reading it is NOT_FOUND")


if __name__ == "__main__":
    main()
