"""The published JSON Schema of ``imagelint diff --format json`` (``imagelint schema diff``)."""

from __future__ import annotations

from typing import Any

from imagelint.diff.policy import KINDS

_INDEXES = {"type": "array", "items": {"type": "integer", "minimum": 0}, "uniqueItems": True}

_BLOCKS = {
    "type": ["object", "null"],
    "description": "an EBS snapshot side (ebs:snap-…) read now: which 512 KiB blocks were read and "
    "from where; null for any other side",
    "additionalProperties": False,
    "required": [
        "mode",
        "base_snapshot_id",
        "fallback",
        "changed_blocks",
        "fetched",
        "reused",
        "base_fetched",
        "stored",
    ],
    "properties": {
        "mode": {
            "enum": ["full", "incremental"],
            "description": "full: every block read came from this snapshot; incremental: NEW read "
            "through ListChangedBlocks against OLD, only changed blocks fetched from NEW",
        },
        "base_snapshot_id": {
            "type": ["string", "null"],
            "description": "NEW: the snapshot its unchanged blocks come from (incremental) or that "
            "was tried (full, with a fallback); null for OLD",
        },
        "fallback": {
            "type": ["string", "null"],
            "description": "NEW read in full: why (OLD is not an EBS snapshot; OLD is in another "
            "region; ListChangedBlocks refused, e.g. UNRELATED_SNAPSHOTS or access denied; sizes "
            "differ; the listing disagrees with the snapshots' own block listings); null otherwise",
        },
        "changed_blocks": {
            "type": ["integer", "null"],
            "minimum": 0,
            "description": "incremental: the blocks ListChangedBlocks names (all of them, read or not)",
        },
        "fetched": {**_INDEXES, "description": "block indexes fetched from this snapshot (GetSnapshotBlock)"},
        "reused": {
            **_INDEXES,
            "description": "incremental: unchanged block indexes served from OLD's blocks already read, "
            "not fetched again",
        },
        "base_fetched": {
            **_INDEXES,
            "description": "incremental: unchanged block indexes OLD's read had not kept, fetched from OLD",
        },
        "stored": {
            **_INDEXES,
            "description": "block indexes read from the on-disk block store ($XDG_CACHE_HOME/imagelint/"
            "blocks, kept by an earlier run) instead of fetched: this snapshot's own, or (incremental) "
            "OLD's among reused",
        },
    },
}

_SIDE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["description", "source", "sha256", "complete", "verdict", "units", "packages", "blocks"],
    "properties": {
        "description": {"type": "string", "description": "the argument: an image root or a report file"},
        "source": {
            "enum": ["image", "report", "cache"],
            "description": "image: audited now; report: a JSON report file; cache: an image that never "
            "changes (an EBS snapshot), its audit with the same version, rules and config kept from an "
            "earlier run (imagelint.diff.cache; IMAGELINT_NO_CACHE=1 turns it off)",
        },
        "sha256": {"type": ["string", "null"], "description": "of the report file"},
        "complete": {
            "type": "boolean",
            "description": "false: data could not be read; a change may be hidden",
        },
        "verdict": {"enum": ["pass", "fail", "inconclusive"], "description": "its own audit's verdict"},
        "units": {"type": "integer", "minimum": 0},
        "packages": {"type": "integer", "minimum": 0},
        "blocks": _BLOCKS,
    },
}


def diff_schema() -> dict[str, Any]:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://imagelint.dev/schemas/diff-v1.json",
        "title": "imagelint diff --format json",
        "type": "object",
        "additionalProperties": False,
        "required": ["schema_version", "tool", "old", "new", "verdict", "exit_code", "counts", "changes"],
        "properties": {
            "schema_version": {"const": 1},
            "tool": {
                "type": "object",
                "required": ["name", "version"],
                "properties": {"name": {"const": "imagelint"}, "version": {"type": "string"}},
            },
            "old": _SIDE,
            "new": _SIDE,
            "volumes": {
                "type": "array",
                "description": "a diff of two AMIs (absent otherwise): each device either AMI maps, "
                "with both volumes' sides (null: not read, the device is on one side only); the top "
                "old/new sides are the AMIs (their root volume's counts)",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["device", "old", "new"],
                    "properties": {
                        "device": {"type": "string"},
                        "old": {"oneOf": [_SIDE, {"type": "null"}]},
                        "new": {"oneOf": [_SIDE, {"type": "null"}]},
                    },
                },
            },
            "verdict": {"enum": ["pass", "fail", "inconclusive"]},
            "exit_code": {"enum": [0, 1, 3]},
            "counts": {
                "type": "object",
                "additionalProperties": False,
                "required": ["changes", "fail", "warn", "allowed", "by_kind"],
                "properties": {
                    "changes": {"type": "integer", "minimum": 0},
                    "fail": {"type": "integer", "minimum": 0},
                    "warn": {"type": "integer", "minimum": 0},
                    "allowed": {"type": "integer", "minimum": 0},
                    "note": {"type": "integer", "minimum": 0},
                    "by_kind": {
                        "type": "object",
                        "propertyNames": {"enum": list(KINDS)},
                        "additionalProperties": {"type": "integer", "minimum": 1},
                    },
                },
            },
            "changes": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": [
                        "kind",
                        "action",
                        "subject",
                        "change",
                        "detail",
                        "unit",
                        "chain",
                        "old",
                        "new",
                    ],
                    "properties": {
                        "device": {
                            "type": "string",
                            "description": "a diff of two AMIs: the device name of the volume the "
                            "change is in (absent otherwise)",
                        },
                        "kind": {"enum": list(KINDS)},
                        "action": {"enum": ["fail", "warn", "allowed", "note"]},
                        "subject": {"type": "string"},
                        "change": {"enum": ["added", "removed", "changed"]},
                        "detail": {"type": "string"},
                        "unit": {"type": ["string", "null"]},
                        "chain": {
                            "type": ["array", "null"],
                            "items": {"type": "string"},
                            "description": "new-boot-units: default.target → … → the unit in NEW; "
                            "removed-boot-units: in OLD",
                        },
                        "old": {"description": "the value in OLD (a unit's inventory entry, a version...)"},
                        "new": {"description": "the value in NEW"},
                    },
                },
            },
        },
    }
