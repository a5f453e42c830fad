"""The DnsRecord plugin, natively: no cluster, no wasm, no DNS service."""
from app import DnsRecordReconciler, external, Spec

from wasmop import Error, External, PrimaryRef
from wasmop.testing import FakeHost


def www(value):
    return {"metadata": {"name": "www", "namespace": "a", "generation": 1},
            "spec": {"zone": "example.com", "name": "www", "type": "A", "value": value}}


def test_desires_the_record_the_spec_names():
    [desired] = FakeHost().desired(DnsRecordReconciler, www("10.0.0.1"))
    assert (desired.dependent, desired.key) == ("record", "www")
    assert desired.object == {"name": "www", "type": "A", "value": "10.0.0.1", "ttl": 300}


def test_reports_the_id_of_the_record_polling_found():
    found = External("record", "www", {"name": "www", "type": "A", "value": "10.0.0.1", "ttl": 300}, "rec-7")
    host = FakeHost()
    host.external = [found]
    run = host.reconcile(DnsRecordReconciler, www("10.0.0.1"))
    assert run.readiness == (True, "www.example.com is served")
    assert run.status == {"id": "rec-7", "fqdn": "www.example.com"}
    assert FakeHost().reconcile(DnsRecordReconciler, www("10.0.0.1")).readiness[0] is False


def test_a_record_of_the_service_is_the_external_object_without_its_id():
    spec = Spec("example.com", "www", "A", "10.0.0.1")
    record = external(spec, {"id": "rec-1", "name": "www", "type": "A", "value": "10.0.0.1", "ttl": 300})
    assert (record.key, record.id, record.object["value"]) == ("www", "rec-1", "10.0.0.1")
    assert "id" not in record.object


def test_natively_the_service_is_out_of_reach_and_worth_a_retry():
    try:
        FakeHost().fetch(DnsRecordReconciler, www("10.0.0.1"))
    except Error as e:
        assert e.kind == "transient" and "only inside the wasmop host" in e.message, e
    else:
        raise AssertionError("fetch must fail natively")


def test_the_services_webhook_names_the_record_to_reconcile():
    named = FakeHost().map_inbound(DnsRecordReconciler, {"namespace": "a", "name": "www"})
    assert named == [PrimaryRef.namespaced("a", "www")]
