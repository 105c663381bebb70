"""node-feature-discovery's `local` source, as nfd-worker reads a feature file, and the label rules
nfd-master and Kubernetes then apply: the checker the fleet test judges iommud's NFD file with
(Debian has no `nfd`). Written from NFD's source/local/local.go and its customization guide
("Local feature source", "Input format") and from Kubernetes' validation of label keys and
values (apimachinery's IsQualifiedName and IsValidLabelValue):

- a file larger than 64 KiB is ignored whole; dot files and what is not a regular file too;
- each line is trimmed of white space; empty lines are skipped;
- a line starting with '#' is a comment, unless it starts with '# +': a directive.
  `# +expiry-time=<RFC 3339>` drops the lines after it once that time has passed (until the next
  expiry-time), `# +no-label` and `# +no-feature` apply to the next feature line only; any other
  directive, or an expiry-time without a valid time, is an error nfd-worker logs;
- other lines are `<key>[=<value>]` split at the first '='; no '=' means the value "true"; a
  later line for the same key replaces the earlier value;
- a key without a namespace ('<prefix>/') is prefixed with feature.node.kubernetes.io/ for now
  and will not be (the DisableAutoPrefix gate): iommud must name its namespace;
- nfd-master publishes a label only in an allowed namespace (feature.node.kubernetes.io or a
  subdomain of it, without -extra-label-ns), and only when Kubernetes accepts it: a prefix that is
  a DNS-1123 subdomain of at most 253 characters, a name of 1 to 63 characters and a value of at
  most 63 (empty allowed), both alphanumeric at each end with '-', '_', '.' between.

NFD's current local source has no deletion syntax: a key starting with '-' (or any other
character Kubernetes refuses) is simply an invalid label, and is reported as one here."""

import datetime
import re

MAX_FILE_BYTES = 65536
NAMESPACE = "feature.node.kubernetes.io"
_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _rfc3339(text: str) -> datetime.datetime | None:
    # Go's time.RFC3339: "2006-01-02T15:04:05Z07:00" (fractional seconds accepted when parsing).
    m = re.fullmatch(r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})", text)
    if m is None:
        return None
    try:
        return datetime.datetime.fromisoformat(m.group(1) + (m.group(2) or "") +
                                               ("+00:00" if m.group(3) == "Z" else m.group(3)))
    except ValueError:
        return None


def label_errors(key: str, value: str) -> list[str]:
    """What nfd-master and Kubernetes refuse in one label (empty: it is published)."""
    errors = []
    prefix, slash, name = key.rpartition("/")
    if not slash:
        errors.append(f"{key!r} has no namespace: NFD prefixes {NAMESPACE}/ for now and will stop doing so")
    else:
        if len(prefix) > 253 or not _SUBDOMAIN.match(prefix):
            errors.append(f"{key!r}: the prefix is not a DNS-1123 subdomain of at most 253 characters")
        elif prefix != NAMESPACE and not prefix.endswith("." + NAMESPACE):
            errors.append(f"{key!r}: namespace {prefix!r} is dropped by nfd-master without -extra-label-ns")
    if not _NAME.match(name):
        errors.append(f"{key!r}: the name must be 1-63 characters, alphanumeric at both ends, '-', '_', '.' between")
    if value and not _NAME.match(value):
        errors.append(f"{key}={value!r}: the value must be at most 63 characters, alphanumeric at both ends, "
                      "'-', '_', '.' between")
    return errors


def parse(data: bytes, now: datetime.datetime | None = None) -> tuple[dict[str, str], list[str]]:
    """The labels nfd-worker would take from one feature file, and every error: directives nfd-worker
    logs as errors and labels nfd-master or Kubernetes would refuse."""
    if len(data) > MAX_FILE_BYTES:
        return {}, [f"{len(data)} bytes: nfd-worker ignores feature files over {MAX_FILE_BYTES} bytes"]
    now = now or datetime.datetime.now(datetime.timezone.utc)
    errors: list[str] = []
    labels: dict[str, str] = {}
    expiry = now  # no directive yet: the lines count
    skip_label = False
    for number, raw in enumerate(data.decode("utf-8", errors="replace").split("\n"), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            if line.startswith("# +"):
                key, eq, value = line[3:].partition("=")
                if key == "expiry-time":
                    when = _rfc3339(value.strip()) if eq else None
                    if when is None:
                        errors.append(f"line {number}: an expiry-time directive without an RFC 3339 time: {line!r}")
                    else:
                        expiry = when
                elif key == "no-label":
                    skip_label = True
                elif key != "no-feature":
                    errors.append(f"line {number}: unknown directive {key!r}")
            continue
        if expiry < now:
            continue
        key, eq, value = line.partition("=")
        value = value if eq else "true"
        if skip_label:
            labels.pop(key, None)
        else:
            labels[key] = value
        skip_label = False
    for key, value in labels.items():
        errors.extend(label_errors(key, value))
    return labels, errors


def check_text(text: str) -> tuple[dict[str, str], list[str]]:
    """parse() on what a feature file holds."""
    return parse(text.encode())
