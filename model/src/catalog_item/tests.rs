use serde_json::json;

use super::*;

fn item(defs: Value) -> CatalogItemSpec {
    serde_json::from_value(json!({"title": "Small web", "template": {"name": "small"}, "published": true, "field_definitions": defs}))
        .expect("a catalog item")
}

fn fields(errs: &ValidationErrors) -> Vec<&str> {
    errs.0.iter().map(|e| e.field.as_str()).collect()
}

/// Accepts every value, or none with `"never"` as the schema.
fn schema(s: &str, _: &Value) -> Result<(), &'static str> {
    if s == "never" { Err("no value meets it") } else { Ok(()) }
}

#[test]
fn an_item_reads_as_osac_writes_it_and_answers_flat() {
    let spec = item(json!([{"path": "boot_disk.size_gib", "display_name": "Disk", "editable": true, "default": 20}]));
    assert_eq!(spec.template, "small");
    assert!(spec.check("object").is_ok());
    let obj = <ComputeInstanceCatalogItem as crate::Object>::assemble(
        "id-1".into(),
        Metadata::new("small-web", "", (chrono::Utc::now(), None), &[], 1, &crate::Labels::default()),
        spec,
        CatalogItemStatus {},
    );
    let out = serde_json::to_value(&obj).unwrap();
    assert_eq!((&out["title"], &out["published"], &out["template"]["name"]), (&json!("Small web"), &json!(true), &json!("small")));
    assert_eq!(out["field_definitions"][0]["default"], 20);
    assert!(out.get("spec").is_none() && out.get("status").is_none(), "{out}");
}

#[test]
fn bad_definitions_are_refused_by_field() {
    let spec = item(json!([
        {"path": "template"},
        {"path": "run_strategy", "default": "Sometimes"},
        {"path": "user_data"},
        {"path": "user_data"},
    ]));
    let errs = spec.check("object").unwrap_err();
    assert_eq!(
        fields(&errs),
        ["object.field_definitions[0].path", "object.field_definitions[1].default", "object.field_definitions[3].path"]
    );
    let asked = item(json!([{"path": "run_strategy", "editable": true, "default": "Halted"}])).check("object").unwrap_err();
    assert_eq!(fields(&asked), ["object.field_definitions[0].default"], "Always is not told from nothing");
    let none = CatalogItemSpec::default().check("object").unwrap_err();
    assert_eq!(fields(&none), ["object.template"]);
}

#[test]
fn defaults_fill_what_the_tenant_left_out_and_fixed_fields_refuse_a_value() {
    let spec = item(json!([
        {"path": "boot_disk.size_gib", "editable": true, "default": 20},
        {"path": "run_strategy", "editable": false, "default": "Halted"},
        {"path": "template_parameters.cpu_count", "editable": true, "validation_schema": "never"},
        {"path": "instance_type", "editable": false},
    ]));
    let mut vm = VirtualMachineSpec::new("small");
    let mut errs = ValidationErrors::default();
    spec.apply(&mut vm, schema, &mut errs);
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!((vm.boot_disk.as_ref().map(|d| d.size_gib), vm.state), (Some(20), PowerState::Stopped));

    let mut vm = VirtualMachineSpec::new("small");
    vm.boot_disk = Some(VmDisk { size_gib: 40, storage_tier: None });
    vm.template_parameters.insert("cpu_count".into(), ParameterValue::new(4));
    vm.instance_type = Some(InstanceTypeReference { id: String::new(), name: "big".into() });
    spec.apply(&mut vm, schema, &mut errs);
    assert_eq!(fields(&errs), ["object.spec.template_parameters.cpu_count", "object.spec.instance_type"]);
    assert_eq!(vm.boot_disk.map(|d| d.size_gib), Some(40), "a tenant's value stays");

    // The item's own value, sent again (as Terraform does), is no change.
    let mut vm = VirtualMachineSpec { state: PowerState::Stopped, ..VirtualMachineSpec::new("small") };
    let mut errs = ValidationErrors::default();
    spec.apply(&mut vm, |_, _| Ok::<(), &str>(()), &mut errs);
    assert!(errs.is_empty(), "{errs:?}");
}

#[test]
fn fixed_fields_stay_for_the_vms_life() {
    let spec = item(json!([{"path": "run_strategy", "default": "Halted"}, {"path": "user_data", "editable": true}]));
    let current = VirtualMachineSpec { state: PowerState::Stopped, ..VirtualMachineSpec::new("small") };
    let mut next = VirtualMachineSpec { user_data: Some("#cloud-config\n".into()), ..current.clone() };
    let mut errs = ValidationErrors::default();
    spec.check_kept(&current, &next, &mut errs);
    assert!(errs.is_empty(), "an editable field changes: {errs:?}");
    next.state = PowerState::Started;
    spec.check_kept(&current, &next, &mut errs);
    assert_eq!(fields(&errs), ["object.spec.state"]);
}

#[test]
fn a_flat_object_is_read_strictly() {
    let flat = Flat::<CatalogItemSpec>::read(json!({
        "@type": CATALOG_ITEM_TYPE_URL, "id": "", "metadata": {"name": "web"}, "title": "Web", "template": "small"
    }))
    .expect("a flat item");
    assert_eq!((flat.id, flat.metadata.and_then(|m| m.name), flat.rest.template.as_str()), (None, Some("web".into()), "small"));
    let err = Flat::<CatalogItemSpec>::read(json!({"title": "Web", "spec": {}})).unwrap_err();
    assert!(err.0[0].field == "object" && err.0[0].reason.contains("spec"), "{err:?}");
    let patch = Flat::<PatchCatalogItem>::read(json!({"published": true})).expect("a patch").rest;
    let spec = item(json!([])).patched(PatchCatalogItem { published: Some(false), ..patch });
    assert!(!spec.published && spec.title == "Small web");
}

#[test]
fn protojson_doubles_are_whole_numbers() {
    let spec =
        item(json!([{"path": "boot_disk.size_gib", "editable": true, "default": 3.0}, {"path": "template_parameters.n", "default": 2.0}]));
    let mut vm = VirtualMachineSpec::new("small");
    let mut errs = ValidationErrors::default();
    spec.apply(&mut vm, schema, &mut errs);
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!((vm.boot_disk.map(|d| d.size_gib), &vm.template_parameters["n"].value), (Some(3), &json!(2)));
}
