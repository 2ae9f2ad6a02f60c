"""gRPC over TLS with grpcio, a client independent of vmaas: a channel that
trusts the server's certificate lists the services by reflection (HTTP/2
chosen by ALPN) and checks health; one that does not trust it fails at the
handshake. Prints one line per step; exits non-zero on the first failure."""
import argparse
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grpc", required=True, help="host:port")
    ap.add_argument("--ca-file", required=True)
    a = ap.parse_args()

    import grpc
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    with open(a.ca_file, "rb") as f:
        creds = grpc.ssl_channel_credentials(root_certificates=f.read())
    ch = grpc.secure_channel(a.grpc, creds)
    grpc.channel_ready_future(ch).result(timeout=20)
    refl = reflection_pb2_grpc.ServerReflectionStub(ch)
    answers = refl.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10)
    names = {s.name for r in answers for s in r.list_services_response.service}
    for want in ["fulfillment.v1.VirtualMachines", "osac.public.v1.ComputeInstances", "grpc.health.v1.Health"]:
        if want not in names:
            sys.exit(f"reflection over TLS does not list {want}: {sorted(names)}")
    print("reflection over TLS lists the services")

    check = ch.unary_unary("/grpc.health.v1.Health/Check", request_serializer=lambda _: b"", response_deserializer=lambda b: b)
    answer = check(None, timeout=10)
    if answer != b"\x08\x01":  # HealthCheckResponse{status: SERVING}
        sys.exit(f"health over TLS: {answer!r}")
    print("health over TLS: SERVING")

    untrusting = grpc.secure_channel(a.grpc, grpc.ssl_channel_credentials())
    try:
        grpc.channel_ready_future(untrusting).result(timeout=5)
        sys.exit("a channel that does not trust the certificate connected")
    except grpc.FutureTimeoutError:
        print("a channel that does not trust the certificate does not connect")


if __name__ == "__main__":
    main()
