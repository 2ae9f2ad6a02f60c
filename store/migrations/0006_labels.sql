-- Labels and annotations of every object: {"labels": {...}, "annotations": {...}}.
ALTER TABLE objects ADD COLUMN meta TEXT NOT NULL DEFAULT '{}';
