#!/usr/bin/env python3
"""Compute instance calls from OSAC's current stubs for the audit log's
test: a create, a read, a create with a bad name, and a delete. Prints one
line per call: `CALL code CODE`."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from osac_client import server_args, with_stubs  # noqa: E402

LATEST = {"osac/public-v1-latest/proto/public": ["osac/public/v1/"]}


def main():
    a = server_args().parse_args()
    with_stubs(a.shared, LATEST, "public-v1-latest", lambda: run(a))


def run(a):
    import grpc
    from osac.public.v1 import compute_instance_type_pb2 as cit, compute_instances_service_pb2 as cis
    from osac.public.v1 import compute_instances_service_pb2_grpc as cis_grpc, metadata_type_pb2 as md
    from osac.public.v1 import compute_instance_template_type_pb2 as ctt

    instances = cis_grpc.ComputeInstancesStub(grpc.insecure_channel(a.grpc))
    who = [("authorization", f"Bearer {a.token}")]

    def call(name, fn):
        try:
            out = fn()
            print(f"{name} code OK", flush=True)
            return out
        except grpc.RpcError as e:
            print(f"{name} code {e.code().name}", flush=True)
            return None

    def instance(name):
        return cit.ComputeInstance(metadata=md.Metadata(name=name),
            spec=cit.ComputeInstanceSpec(template=ctt.ComputeInstanceTemplateReference(name="tiny")))

    made = call("create", lambda: instances.Create(cis.ComputeInstancesCreateRequest(object=instance("audited")), metadata=who, timeout=30))
    call("get", lambda: instances.Get(cis.ComputeInstancesGetRequest(id=made.object.id), metadata=who, timeout=30))
    call("bad", lambda: instances.Create(cis.ComputeInstancesCreateRequest(object=instance("Bad Name")), metadata=who, timeout=30))
    call("delete", lambda: instances.Delete(cis.ComputeInstancesDeleteRequest(id=made.object.id), metadata=who, timeout=30))


if __name__ == "__main__":
    main()
