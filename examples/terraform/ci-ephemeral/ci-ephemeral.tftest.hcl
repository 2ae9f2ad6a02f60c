# `tofu test` (or `terraform test`, 1.6 and later): two runners up, each
# READY with an address of its own, then one fewer, then all destroyed.
#   export VMAAS_ENDPOINT=http://127.0.0.1:8000 VMAAS_TOKEN=...
#   tofu test

variables {
  count_vms = 2
  prefix    = "ci-test"
}

run "two_runners" {
  command = apply

  assert {
    condition     = length(output.external_ips) == 2 && length(distinct(output.external_ips)) == 2
    error_message = "two runners with distinct addresses expected: ${jsonencode(output.external_ips)}"
  }

  assert {
    condition     = alltrue([for vm in vmaas_virtual_machine.runner : vm.status == "READY"])
    error_message = "every runner is READY once apply ends"
  }
}

run "scaled_down" {
  command = apply

  variables {
    count_vms = 1
  }

  assert {
    condition     = length(output.external_ips) == 1 && vmaas_virtual_machine.runner[0].name == "ci-test-0"
    error_message = "scaling down keeps the first runner: ${jsonencode(output.external_ips)}"
  }
}
