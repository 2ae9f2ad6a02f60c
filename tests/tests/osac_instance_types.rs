//! OSAC's `InstanceTypes` as OSAC states it now: a Python client generated
//! by `grpcio-tools` from `../shared/osac/public-v1-latest` (not the
//! project's `.proto` files) publishes, lists (with a CEL filter), reads,
//! deprecates with a typed replacement through an update mask, obsoletes
//! and deletes instance types over gRPC; a tenant's create is refused, a
//! bad one names its field; the gateway's JSON carries the same reference.

use vmaas_tests::{Db, Server};

#[tokio::test(flavor = "multi_thread")]
async fn osacs_current_instance_types_client_drives_them_over_grpc() {
    let s = Server::start(Db::Sqlite).await.expect("sqlite");
    let (user, admin) = (s.token("acme", false), s.token("ops", true));
    let steps = [
        "compiled public-v1-latest's instance types",
        "published two instance types, one with a GPU",
        "with a CEL filter, and reads one",
        "a tenant creating an instance type is PERMISSION_DENIED",
        "INVALID_ARGUMENT naming object.spec.cores",
        "deprecated with a typed replacement through an update mask",
        "made OBSOLETE, with its time and the replacement kept",
        "the replacement is {id, name}",
        "reading it is NOT_FOUND",
    ];
    vmaas_tests::osac::run_client(&s, "instance_types_client.py", &["--token", &user, "--admin-token", &admin], &steps).await;
}
