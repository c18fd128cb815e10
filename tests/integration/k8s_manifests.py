#!/usr/bin/env python3
"""Checks deploy/kubernetes/: YAML syntax (python3-yaml) and the fields
Vario relies on, cross-checked with the code where they must agree.

Usage: k8s_manifests.py SOURCE_DIR [VARIO]   (exit 77 = skipped: no yaml)

Not a Kubernetes schema validation (no cluster, no kubeconform here):
it checks what would break Vario if wrong — the Role grants exactly what
the kubernetes provider calls, the provider options the controller is
given exist, Services select pods that exist and name ports those pods
expose, every $(VAR) in args is defined, and, when VARIO has the role
commands, every flag in the manifests is one that command accepts.
"""
import os
import re
import subprocess
import sys

try:
    import yaml
except ImportError:
    print("skip: python3-yaml not installed")
    sys.exit(77)

src = sys.argv[1]
vario = sys.argv[2] if len(sys.argv) > 2 else None
d = os.path.join(src, "deploy", "kubernetes")
fails = []


def check(cond, msg):
    if not cond:
        fails.append(msg)


docs = []  # (file, doc)
files = sorted(f for f in os.listdir(d) if f.endswith(".yaml"))
for f in files:
    with open(os.path.join(d, f)) as fh:
        try:
            for doc in yaml.safe_load_all(fh):
                if doc is not None:
                    docs.append((f, doc))
        except yaml.YAMLError as e:
            fails.append(f"{f}: YAML: {e}")

objs = [(f, o) for f, o in docs if o.get("kind") != "Kustomization"]
for f, o in objs:
    for k in ("apiVersion", "kind", "metadata"):
        check(k in o, f"{f}: no {k}")
    md = o.get("metadata") or {}
    check(md.get("name"), f"{f}: {o.get('kind')} without metadata.name")
    if o.get("kind") != "Namespace":
        check(md.get("namespace") == "vario",
              f"{f}: {o.get('kind')}/{md.get('name')} not in namespace vario")


def by_kind(kind):
    return {o["metadata"]["name"]: o for _, o in objs if o.get("kind") == kind}


kust = [o for _, o in docs if o.get("kind") == "Kustomization"]
check(len(kust) == 1, "one kustomization.yaml")
if kust:
    listed = set(kust[0].get("resources", []))
    want = set(files) - {"kustomization.yaml"}
    check(listed == want, f"kustomization resources {sorted(listed)} != files {sorted(want)}")

deps = by_kind("Deployment")
for name in ("vario-redis", "vario-controller", "vario-worker", "vario-frontend"):
    check(name in deps, f"no Deployment {name}")
for name in ("vario-redis", "vario-controller", "vario-frontend"):
    check(name in by_kind("Service"), f"no Service {name}")
check("vario" in by_kind("Namespace"), "no Namespace vario")
check("vario-settings" in by_kind("ConfigMap"), "no ConfigMap vario-settings")
cm = by_kind("ConfigMap").get("vario-settings", {}).get("data", {})

# Deployments: selectors match their templates; containers complete.
for name, dep in deps.items():
    spec = dep.get("spec", {})
    sel = spec.get("selector", {}).get("matchLabels", {})
    labels = spec.get("template", {}).get("metadata", {}).get("labels", {})
    check(sel and all(labels.get(k) == v for k, v in sel.items()),
          f"Deployment {name}: selector {sel} does not match template labels {labels}")
    for c in spec.get("template", {}).get("spec", {}).get("containers", []):
        check(c.get("image"), f"{name}/{c.get('name')}: no image")
        check("resources" in c, f"{name}/{c.get('name')}: no resources")
        env = {e["name"] for e in c.get("env", [])}
        if any(ef.get("configMapRef", {}).get("name") == "vario-settings"
               for ef in c.get("envFrom", [])):
            env |= set(cm)
        for a in c.get("args", []):
            for v in re.findall(r"\$\((\w+)\)", str(a)):
                check(v in env, f"{name}/{c['name']}: $({v}) in args is not defined")
            check(isinstance(a, str), f"{name}/{c['name']}: arg {a!r} is not a string")

# Services select a Deployment's pods and target a port they name.
for sname, svc in by_kind("Service").items():
    sel = svc.get("spec", {}).get("selector", {})
    match = [dep for dep in deps.values()
             if all(dep["spec"]["template"]["metadata"]["labels"].get(k) == v
                    for k, v in sel.items())]
    check(len(match) == 1, f"Service {sname}: selector {sel} matches {len(match)} Deployments")
    if match:
        names = {p.get("name") for c in match[0]["spec"]["template"]["spec"]["containers"]
                 for p in c.get("ports", [])}
        for p in svc["spec"].get("ports", []):
            tp = p.get("targetPort")
            check(tp in names or isinstance(tp, int),
                  f"Service {sname}: targetPort {tp} not a named container port")

# RBAC: exactly what the kubernetes provider calls.
roles = by_kind("Role")
check(list(roles) == ["vario-worker-scaler"], f"Roles {list(roles)}")
rules = {}
for r in roles.get("vario-worker-scaler", {}).get("rules", []):
    for g in r.get("apiGroups", []):
        for res in r.get("resources", []):
            rules.setdefault((g, res), set()).update(r.get("verbs", []))
check(rules == {("apps", "deployments/scale"): {"get", "patch"}, ("", "pods"): {"list"}},
      f"Role rules {rules}: want exactly deployments/scale get,patch and pods list")
for r in roles.get("vario-worker-scaler", {}).get("rules", []):
    if "deployments/scale" in r.get("resources", []):
        check(r.get("resourceNames") == ["vario-worker"],
              f"deployments/scale rule should name vario-worker only: {r.get('resourceNames')}")
rb = by_kind("RoleBinding").get("vario-worker-scaler", {})
check(rb.get("roleRef", {}).get("name") == "vario-worker-scaler", "RoleBinding roleRef")
check([(s.get("kind"), s.get("name")) for s in rb.get("subjects", [])]
      == [("ServiceAccount", "vario-controller")], "RoleBinding subject")
check("vario-controller" in by_kind("ServiceAccount"), "no ServiceAccount vario-controller")
ctl = deps.get("vario-controller", {}).get("spec", {}).get("template", {}).get("spec", {})
check(ctl.get("serviceAccountName") == "vario-controller",
      "controller does not run as ServiceAccount vario-controller")
for n in ("vario-worker", "vario-frontend"):
    ps = deps.get(n, {}).get("spec", {}).get("template", {}).get("spec", {})
    check(ps.get("automountServiceAccountToken") is False,
          f"{n}: should not mount an API token (it never calls the API)")


def args_of(name):
    cs = deps.get(name, {}).get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
    return cs[0].get("args", []) if cs else []


def opt(args, flag):
    return [args[i + 1] for i, a in enumerate(args[:-1]) if a == flag]


# The controller's provider options are the kubernetes provider's keys,
# and name the worker Deployment and its labels.
cargs = args_of("vario-controller")
check(opt(cargs, "--provider") == ["kubernetes"], "controller: --provider kubernetes")
with open(os.path.join(src, "src", "cluster", "provider_k8s.c")) as fh:
    keys = set(re.findall(r'KEY\("([a-z-]+)"\)', fh.read()))
check("deployment" in keys and "selector" in keys, f"provider keys from source: {keys}")
popts = dict(o.split("=", 1) for o in opt(cargs, "--provider-opt"))
for k in popts:
    check(k in keys, f"controller: --provider-opt {k} is not a kubernetes provider option {sorted(keys)}")
check(popts.get("deployment") == "vario-worker", "controller: deployment=vario-worker")
wlabels = deps.get("vario-worker", {}).get("spec", {}).get("template", {}).get("metadata", {}).get("labels", {})
for term in popts.get("selector", "app=vario-worker").split(","):
    k, v = term.split("=", 1)
    check(wlabels.get(k) == v, f"provider selector {term} does not select the worker pods {wlabels}")

# Workers register under their pod name (what the provider reports).
wargs = args_of("vario-worker")
check(opt(wargs, "--worker-id") == ["$(POD_NAME)"], "worker: --worker-id $(POD_NAME)")
wenv = {e["name"]: e for e in deps.get("vario-worker", {}).get("spec", {}).get("template", {})
        .get("spec", {}).get("containers", [{}])[0].get("env", [])}
check(wenv.get("POD_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
      == "metadata.name", "worker: POD_NAME from metadata.name")

# Dockerfile: Debian bookworm, dependencies through setup-deps.sh.
with open(os.path.join(d, "Dockerfile")) as fh:
    df = fh.read()
check(re.search(r"^FROM debian:bookworm", df, re.M), "Dockerfile: FROM debian:bookworm")
check("scripts/setup-deps.sh build" in df, "Dockerfile: scripts/setup-deps.sh build")
with open(os.path.join(src, "docs", "KUBERNETES.md")) as fh:
    kd = fh.read()
check("kubectl create secret generic vario-admin" in kd, "KUBERNETES.md: how to create vario-admin")

# Flags: when the binary has the role commands (with cluster membership,
# --registry), every --flag in the manifests must be one its help lists.
if vario:
    for dep, cmd in (("vario-controller", "controller"), ("vario-worker", "worker"),
                     ("vario-frontend", "frontend")):
        a = args_of(dep)
        if not a or a[0] != cmd:
            fails.append(f"{dep}: args start with {a[:1]}, want {cmd}")
            continue
        r = subprocess.run([vario, cmd, "--help"], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"note: `vario {cmd} --help` exit {r.returncode}: flags not checked")
            continue
        helptext = r.stdout + r.stderr
        # Until the role joins a cluster (issue 18's --registry) its flags
        # cannot match the manifests; say so instead of failing.
        if "--registry" not in helptext:
            print(f"note: `vario {cmd}` has no --registry yet: flags not checked")
            continue
        # serve options are accepted by the roles that take them
        rs = subprocess.run([vario, "serve", "--help"], capture_output=True, text=True)
        if "SERVE-OPTIONS" in helptext or "serve options" in helptext:
            helptext += rs.stdout + rs.stderr
        for f in (x for x in a if x.startswith("--")):
            check(re.search(re.escape(f) + r"\b", helptext),
                  f"{dep}: `vario {cmd} --help` does not list {f}")

for f in fails:
    print("FAIL:", f)
print(f"{len(docs)} documents in {len(files)} files, {len(fails)} failures")
sys.exit(1 if fails else 0)
