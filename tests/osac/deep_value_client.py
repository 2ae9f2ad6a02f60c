#!/usr/bin/env python3
"""A compute instance create whose template parameter is a
google.protobuf.Value nested DEPTH levels deep (lists in lists), from OSAC's
current stubs: prints the status code and details the server answers with,
as `code CODE details DETAILS`, one line per depth."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from osac_client import server_args, with_stubs  # noqa: E402

LATEST = {"osac/public-v1-latest/proto/public": ["osac/public/v1/"]}


def varint(n):
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def nested_value(depth):
    """A Value holding a list holding a Value ... DEPTH deep, encoded by
    hand from the inside out in linear time (each level: Value.list_value
    = 6, ListValue.values = 1)."""
    sizes = [2]  # the innermost Value: null_value = 0
    heads = []
    for _ in range(depth):
        inner = sizes[-1]
        list_head = bytes([1 << 3 | 2]) + varint(inner)
        list_size = len(list_head) + inner
        value_head = bytes([6 << 3 | 2]) + varint(list_size)
        heads.append(value_head + list_head)
        sizes.append(len(value_head) + list_size)
    return b"".join(reversed(heads)) + b"\x08\x00"


def main():
    ap = server_args()
    ap.add_argument("depths", nargs="+", type=int)
    a = ap.parse_args()
    with_stubs(a.shared, LATEST, "public-v1-latest", lambda: run(a))


def run(a):
    import grpc
    from google.protobuf import any_pb2
    from osac.public.v1 import compute_instance_type_pb2 as cit, compute_instances_service_pb2 as cis
    from osac.public.v1 import compute_instances_service_pb2_grpc as cis_grpc, metadata_type_pb2 as md
    from osac.public.v1 import compute_instance_template_type_pb2 as ctt

    ch = grpc.insecure_channel(a.grpc, options=[("grpc.max_send_message_length", 16 << 20)])
    instances = cis_grpc.ComputeInstancesStub(ch)
    for depth in a.depths:
        deep = any_pb2.Any(type_url="type.googleapis.com/google.protobuf.Value", value=nested_value(depth))
        obj = cit.ComputeInstance(metadata=md.Metadata(name=f"deep-{depth}"),
            spec=cit.ComputeInstanceSpec(template=ctt.ComputeInstanceTemplateReference(name="tiny"),
                template_parameters={"x": deep}))
        try:
            instances.Create(cis.ComputeInstancesCreateRequest(object=obj),
                metadata=[("authorization", f"Bearer {a.token}")], timeout=60)
            print(f"depth {depth} code OK", flush=True)
        except grpc.RpcError as e:
            print(f"depth {depth} code {e.code().name} details {e.details()}", flush=True)


if __name__ == "__main__":
    main()
