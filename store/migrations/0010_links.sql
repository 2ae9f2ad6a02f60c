-- What an object names without pinning it: a volume's or an external IP's
-- attachment names its VM, a load balancer its targets, a VM the image it
-- boots and a volume the image it is made from ('image:' and the name), an
-- image the URL it is imported from ('source:' and the URL).
-- How a VM's or an image's reconcile finds them without reading every one
-- of their kind.
-- Kept by every write of a spec on PostgreSQL (`links_made` says the rows
-- stored before this table were indexed, once, at the first start after
-- it was made). SQLite keeps the index in memory and leaves these empty.
CREATE TABLE IF NOT EXISTS links (
    source TEXT NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
    target TEXT NOT NULL,
    PRIMARY KEY (source, target)
);
CREATE INDEX IF NOT EXISTS links_target ON links (target);
CREATE TABLE IF NOT EXISTS links_made (
    singleton INTEGER PRIMARY KEY,
    at        TEXT NOT NULL
);

-- Objects by name across tenants (a public image, an administrator's lookup).
CREATE INDEX IF NOT EXISTS objects_kind_name ON objects (kind, name);
