"""Settings: YAML plus ARCHFIT_ env overrides, validated at start with errors naming the key."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from extender.cli.main import main
from extender.config import docs as settings_doc
from extender.config.loading import ConfigError, from_mapping, ignored_env, load
from extender.config.settings import Settings

ROOT = Path(__file__).resolve().parents[3]


def test_the_shipped_config_file_loads_and_matches_the_defaults():
    """config/archfit.yaml documents the defaults; it must stay in step with the code."""
    assert Settings() == load(ROOT / "config" / "archfit.yaml", {})


def test_env_overrides_win_over_the_file(tmp_path):
    """ARCHFIT_SECTION__KEY overrides, with YAML values for lists and maps."""
    path = tmp_path / "a.yaml"
    path.write_text("policy:\n  failurePolicy: fail-open\n  excludedNamespaces: [a]\n")
    settings = load(
        path,
        {
            "ARCHFIT_POLICY__FAILURE_POLICY": "fail-closed",
            "ARCHFIT_POLICY__ARCH_PREFERENCE": "{amd64: 10, aarch64: 3}",
            "ARCHFIT_SERVER__PORT": "9999",
            "UNRELATED": "x",
        },
    )
    assert ("fail-closed", ("a",), {"amd64": 10, "arm64": 3}, 9999) == (
        settings.policy.failure_policy,
        settings.policy.excluded_namespaces,
        settings.policy.arch_preference,
        settings.server.port,
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"polcy": {}}, "polcy: unknown setting"),
        ({"policy": {"failurePolicy": "fail-sideways"}}, "policy.failurePolicy: 'fail-sideways'"),
        ({"policy": {"mode": 1}}, "policy.mode"),
        ({"policy": {"archPreference": {"arm64": 11}}}, "policy.archPreference.arm64: score 11"),
        ({"policy": {"archPreference": {"arm64": "high"}}}, "policy.archPreference.arm64: must be"),
        (
            {"policy": {"excludedNamespaces": "kube-system"}},
            "policy.excludedNamespaces: must be a list",
        ),
        ({"server": {"port": 70000}}, "server.port: 70000 is not a TCP port"),
        ({"server": {"port": True}}, "server.port: must be an integer"),
        ({"server": {"prefix": "scheduler"}}, "server.prefix"),
        ({"server": []}, "server: must be a mapping"),
        ({"kubernetes": {"nodeIndex": "yes"}}, "kubernetes.nodeIndex: must be true or false"),
        ({"policy": {"matching": "lenient"}}, "policy.matching: 'lenient' is not one of"),
        ({"policy": {"looseMatching": "yes"}}, "policy.looseMatching: must be true or false"),
        (
            {"policy": {"looseMatching": True, "matching": "auto"}},
            "policy.looseMatching: replaced by policy.matching",
        ),
    ],
)
def test_bad_settings_raise_an_error_naming_the_key(data, message):
    """Every mistake names the key it is about."""
    with pytest.raises(ConfigError, match=message):
        from_mapping(data)


@pytest.mark.parametrize(
    ("policy", "expected"),
    [({}, "auto"), ({"looseMatching": True}, "loose"), ({"looseMatching": False}, "strict")],
)
def test_the_older_loose_matching_flag_still_reads_as_a_matching_rule(policy, expected):
    """Files written for `looseMatching: true|false` keep their meaning: loose or strict."""
    assert expected == from_mapping({"policy": policy}).policy.matching


def test_the_older_loose_matching_flag_works_as_an_env_override(tmp_path):
    """ARCHFIT_POLICY__LOOSE_MATCHING=true still turns on containerd's Only() fallbacks."""
    path = tmp_path / "a.yaml"
    path.write_text("policy:\n  mode: enforce\n")
    settings = load(path, {"ARCHFIT_POLICY__LOOSE_MATCHING": "true"})
    assert ("loose", True) == (settings.policy.matching, settings.policy.loose_matching)


@pytest.mark.parametrize("alias", ["docker.io", "index.docker.io", "registry-1.docker.io"])
def test_docker_hub_host_settings_apply_whichever_alias_names_them(alias):
    """Mirrors written under index.docker.io are Docker Hub's, as images call it docker.io."""
    mirror = {"url": "https://mirror.example.com"}
    settings = from_mapping({"registry": {"hosts": {alias: {"mirrors": [mirror]}}}})
    assert ["https://mirror.example.com"] == [
        m.url for m in settings.registry.host("docker.io").mirrors
    ]


def test_docker_hub_named_twice_in_hosts_is_an_error():
    """Two aliases of one registry would make one of them silently lose."""
    with pytest.raises(ConfigError, match=r"registry\.hosts: Docker Hub is named twice"):
        from_mapping({"registry": {"hosts": {"docker.io": {}, "index.docker.io": {}}}})


def test_an_env_override_that_is_not_yaml_names_the_variable():
    """Even a broken env value says which variable is at fault."""
    with pytest.raises(ConfigError, match="ARCHFIT_POLICY__MODE"):
        load(None, {"ARCHFIT_POLICY__MODE": "[unclosed"})


def test_serve_with_bad_config_exits_non_zero_naming_the_key(tmp_path):
    """archfit serve refuses to start on bad config, before binding any port."""
    path = tmp_path / "bad.yaml"
    path.write_text("policy:\n  failurePolicy: maybe\n")
    result = subprocess.run(
        [sys.executable, "-m", "extender", "serve", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert 2 == result.returncode
    assert "policy.failurePolicy" in result.stderr


def test_the_settings_table_lives_in_docs_configuration_md_alone():
    """Operators read the generated table in docs/configuration.md; the README links it and
    keeps no copy to drift."""
    readme = (ROOT / "README.md").read_text()
    assert (True, False, True) == (
        settings_doc.markdown_table() in (ROOT / "docs" / "configuration.md").read_text(),
        "| `server.host` |" in readme,
        "](docs/configuration.md)" in readme,
    )


def test_the_shipped_config_file_is_the_generated_commented_defaults():
    """config/archfit.yaml is `archfit config --defaults`, so its comments stay true."""
    assert settings_doc.commented_defaults() == (ROOT / "config" / "archfit.yaml").read_text()


@pytest.mark.parametrize("word", ["off", "on", "yes", "no", "n", "y", "true", "null", "~"])
def test_an_env_override_of_a_string_setting_is_read_as_a_string(word):
    """YAML 1.1 would read `off` as false; a string setting takes the text as written."""
    settings = load(None, {"ARCHFIT_CACHE__NAMESPACE": word})
    assert word == settings.cache.namespace


def test_kubernetes_mode_off_from_the_env_is_accepted_as_the_readme_writes_it():
    """ARCHFIT_KUBERNETES__MODE=off, exactly as documented."""
    assert "off" == load(None, {"ARCHFIT_KUBERNETES__MODE": "off"}).kubernetes.mode


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("127.0.0.1/8", ("127.0.0.1/8",)),
        ("10.0.0.0/8, registry.internal", ("10.0.0.0/8", "registry.internal")),
        ("[10.0.0.0/8, 192.168.0.0/16]", ("10.0.0.0/8", "192.168.0.0/16")),
    ],
)
def test_a_list_setting_from_the_env_takes_commas_or_yaml(raw, expected):
    """ARCHFIT_REGISTRY__ALLOWED_NETWORKS=127.0.0.1/8 is a list of one."""
    assert (
        expected
        == load(None, {"ARCHFIT_REGISTRY__ALLOWED_NETWORKS": raw}).registry.allowed_networks
    )


@pytest.mark.parametrize(
    ("variable", "raw", "expected"),
    [
        ("ARCHFIT_KUBERNETES__NODE_INDEX", "off", False),
        ("ARCHFIT_KUBERNETES__NODE_INDEX", "TRUE", True),
        ("ARCHFIT_SERVER__PORT", " 9000 ", 9000),
        ("ARCHFIT_POLICY__RESOLVE_DEADLINE_SECONDS", "2", 2.0),
        ("ARCHFIT_CACHE__STALE_IF_ERROR_SECONDS", "0", 0),
    ],
)
def test_env_overrides_are_read_as_the_settings_own_type(variable, raw, expected):
    """Booleans, integers and numbers parse by the setting's type, not by YAML's guess."""
    section, key = variable.removeprefix("ARCHFIT_").lower().split("__")
    settings = load(None, {variable: raw})
    attribute = {"node_index": "node_index", "port": "port"}.get(key, key)
    assert expected == getattr(getattr(settings, section), attribute)


def test_a_bad_env_value_names_the_variable_and_the_key():
    """An integer setting given words says which variable and which key."""
    with pytest.raises(ConfigError, match=r"server\.port \(from ARCHFIT_SERVER__PORT='many'\)"):
        load(None, {"ARCHFIT_SERVER__PORT": "many"})


def test_a_negative_stale_if_error_time_is_refused_naming_the_key():
    """staleIfErrorSeconds may be 0 (never answer stale) but not less."""
    with pytest.raises(ConfigError, match=r"staleIfErrorSeconds must be 0 or more"):
        from_mapping({"cache": {"staleIfErrorSeconds": -1}})


def test_a_list_setting_written_as_a_scalar_in_the_file_says_how_to_write_a_list():
    """The message shows both spellings."""
    with pytest.raises(ConfigError, match=r"must be a list \(YAML: \[a, b\]; an env var: a,b\)"):
        from_mapping({"registry": {"allowedNetworks": "10.0.0.0/8"}})


def test_docs_configuration_md_is_the_generated_page():
    """docs/configuration.md is `archfit config --docs`, so it documents every setting as it is."""
    assert settings_doc.configuration_page() == (ROOT / "docs" / "configuration.md").read_text()


def test_plain_http_registries_are_discoverable_in_the_defaults_and_the_registries_guide():
    """registry.hosts.<host>.plainHttp was documented nowhere an operator would look."""
    assert "plainHttp: true" in settings_doc.commented_defaults()
    guide = (ROOT / "docs" / "registries.md").read_text()
    example = guide[guide.index("```yaml\n  registry:") :]
    settings = from_mapping(yaml.safe_load(example.split("```yaml\n", 1)[1].split("```", 1)[0]))
    assert settings.registry.host("registry.kube-system.svc:5000").plain_http


def test_an_archfit_variable_outside_the_settings_syntax_is_left_to_its_own_tool():
    """ARCHFIT_E2E_CACHE (the test binaries' cache) names no setting and stops nothing."""
    assert Settings() == load(None, {"ARCHFIT_E2E_CACHE": "/tmp/cache"})


def test_a_misspelt_section_in_the_settings_syntax_is_still_an_error():
    """ARCHFIT_POLCY__MODE has the `__` of a setting path: a typo must not pass silently."""
    with pytest.raises(ConfigError, match=r"polcy \(from ARCHFIT_POLCY__MODE\): unknown setting"):
        load(None, {"ARCHFIT_POLCY__MODE": "dry-run"})


def test_a_variable_with_one_underscore_after_a_section_is_warned_about_by_name():
    """ARCHFIT_POLICY_FAILURE_POLICY sets nothing; the warning names it and the right spelling,
    while other tools' ARCHFIT_ variables stay unmentioned."""
    environ = {"ARCHFIT_POLICY_FAILURE_POLICY": "fail-closed", "ARCHFIT_E2E_CACHE": "/tmp/x"}
    assert [
        "ARCHFIT_POLICY_FAILURE_POLICY sets nothing: a section and its key are joined by two "
        "underscores (ARCHFIT_POLICY__FAILURE_POLICY)"
    ] == ignored_env(environ)


def test_the_cli_prints_that_warning_before_anything_else(tmp_path, capsys, monkeypatch):
    """`archfit config` (as every command) says so on stderr."""
    monkeypatch.setenv("ARCHFIT_LOGGING_LEVEL", "debug")
    main(["config", "--config", str(ROOT / "config" / "archfit.yaml")])
    assert "archfit: warning: ARCHFIT_LOGGING_LEVEL sets nothing" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"ARCHFIT_POLICY__FAILUR": "x"}, "policy.failur (from ARCHFIT_POLICY__FAILUR): unknown"),
        ({"ARCHFIT_POLICYX__MODE": "x"}, "policyx (from ARCHFIT_POLICYX__MODE): unknown setting"),
        (
            {"ARCHFIT_SERVER__PORT": "eighty"},
            "server.port (from ARCHFIT_SERVER__PORT='eighty'): must be an integer",
        ),
        (
            {"ARCHFIT_CACHE__FAILURE_TTL_SECONDS": "1.5"},
            "cache.failureTtlSeconds (from ARCHFIT_CACHE__FAILURE_TTL_SECONDS='1.5'): must be an",
        ),
        (
            {"ARCHFIT_POLICY__RESOLVE_DEADLINE_SECONDS": "soon"},
            "policy.resolveDeadlineSeconds (from ARCHFIT_POLICY__RESOLVE_DEADLINE_SECONDS='soon')"
            ": must be a number",
        ),
    ],
)
def test_a_bad_env_override_names_the_variable_and_what_it_must_be(environ, message):
    """No `invalid literal for int()`, and an unknown key says which variable wrote it."""
    with pytest.raises(ConfigError) as refused:
        load(None, environ)
    assert message in str(refused.value)


@pytest.mark.parametrize("written", ["DEBUG", "Debug", "debug"])
def test_the_logging_level_is_read_whatever_its_case(written):
    """`logging.level: DEBUG`, as Python's logging takes it."""
    assert "debug" == from_mapping({"logging": {"level": written}}).logging.level


def test_an_arch_preference_for_an_architecture_no_node_reports_is_refused():
    """`archPreference: {arm65: 5}` would never score anything; it is a typo."""
    with pytest.raises(ConfigError, match=r"policy\.archPreference\.arm65: not an architecture"):
        from_mapping({"policy": {"archPreference": {"arm65": 5}}})


def test_archfit_config_says_which_file_it_read(tmp_path, capsys, monkeypatch):
    """Elsewhere than the clone, config/archfit.yaml is not there: it says so, and names the
    file it did read, with the variables that override it."""
    monkeypatch.chdir(tmp_path)
    main(["config"])
    without = capsys.readouterr().out.splitlines()[0]
    monkeypatch.setenv("ARCHFIT_SERVER__PORT", "9000")
    (tmp_path / "mine.yaml").write_text("{}\n")
    main(["config", "--config", "mine.yaml"])
    with_file = capsys.readouterr().out.splitlines()[0]
    assert [
        f"# archfit config: no file read (config/archfit.yaml is not in {tmp_path}; "
        "--config PATH names one): built-in defaults",
        f"# archfit config: read {tmp_path / 'mine.yaml'}, overridden by ARCHFIT_SERVER__PORT",
    ] == [without, with_file]


def test_archfit_config_prints_no_proxy_or_redis_password(tmp_path):
    """`archfit config` shows each URL with its password as ***, the rest as set."""
    path = tmp_path / "archfit.yaml"
    path.write_text(
        "registry:\n  allowedNetworks: [proxy.corp]\n  proxy:\n"
        "    httpsProxy: http://bob:pr0xy-pw@proxy.corp:3128\n"
        "cache:\n  url: redis://:r3dis-pw@redis.archfit:6379/0\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "extender", "config", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    shown = yaml.safe_load(result.stdout)
    assert ("http://bob:***@proxy.corp:3128", "redis://:***@redis.archfit:6379/0") == (
        shown["registry"]["proxy"]["httpsProxy"],
        shown["cache"]["url"],
    )
    assert "pr0xy-pw" not in result.stdout + result.stderr


#: After this long idle, kube-apiserver's webhook client and kube-scheduler's extender client
#: close a kept-alive connection themselves: client-go's transports take net/http's
#: DefaultTransport IdleConnTimeout (k8s.io/apimachinery/pkg/util/net SetTransportDefaults).
GO_CLIENT_IDLE_SECONDS = 90.0


def test_archfit_keeps_an_idle_connection_open_longer_than_its_go_clients_do():
    """The client closes an idle connection first, so no call pays a handshake or races a close."""
    assert (True, 120.0) == (
        Settings().server.keepalive_timeout_seconds > GO_CLIENT_IDLE_SECONDS,
        Settings().server.keepalive_timeout_seconds,
    )


def test_an_unknown_variable_is_answered_in_the_spelling_of_variables():
    """ARCHFIT_POLICY__FAILUREPOLICY: the variable that sets policy.failurePolicy, and the known
    ones as variables, not as YAML keys a variable cannot use."""
    with pytest.raises(ConfigError) as raised:
        load(None, {"ARCHFIT_POLICY__FAILUREPOLICY": "fail-closed"})
    message = str(raised.value)
    assert (True, True, False) == (
        "ARCHFIT_POLICY__FAILURE_POLICY sets policy.failurePolicy" in message,
        "known: ARCHFIT_POLICY__ARCH_PREFERENCE, " in message,
        "known: archPreference" in message,
    )


@pytest.mark.parametrize(
    ("written", "example"),
    [("amd64=10", "'{amd64: 10}'"), ("amd64=10,arm64=0", "'{amd64: 10, arm64: 0}'"),
     ("amd64", "'{key: value, key: value}'")],
)  # fmt: skip
def test_a_mapping_written_otherwise_is_answered_with_an_example(written, example):
    """ARCHFIT_POLICY__ARCH_PREFERENCE=amd64=10 gets the flow syntax that says it."""
    with pytest.raises(ConfigError) as raised:
        load(None, {"ARCHFIT_POLICY__ARCH_PREFERENCE": written})
    assert f"must be a mapping, not {written!r}: YAML's flow syntax" in str(raised.value)
    assert example in str(raised.value)
