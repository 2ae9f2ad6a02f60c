# `tofu test` (or `terraform test`, 1.6 and later): both tiers up, the load
# balancer with an address, the backend on the app subnet.
#   export VMAAS_ENDPOINT=http://127.0.0.1:8000 VMAAS_TOKEN=...
#   tofu test

run "both_tiers" {
  command = apply

  assert {
    condition     = can(regex("^[0-9]+(\\.[0-9]+){3}$", output.load_balancer))
    error_message = "the load balancer has an IPv4 address: ${output.load_balancer}"
  }

  assert {
    condition     = cidrhost("10.60.1.0/24", 0) == cidrhost("${output.backend_ip}/24", 0)
    error_message = "the backend is on the app subnet: ${output.backend_ip}"
  }
}
