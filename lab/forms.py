from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, cast

from django import forms

from lab.models import PROFILES, BenchmarkJob, NotificationSettings
from runs.matrix import BASELINE, FORMAT_NAMES, MATRIX_SUITES, PROGRAM_NAMES
from worker.rules.reasoning import DEFAULT_THINKING_BUDGET, MAX_TOKENS_CEILING

if TYPE_CHECKING:  # for annotations only: clean imports lab.services when it runs
    from lab.services import Placement

# Grouped, so a prompt format is never taken for the program of a similar name.
HARNESS_CHOICES = [
    (BASELINE, f"{BASELINE} (the engine's own loop)"),
    ("Prompt formats", [(name, name) for name in FORMAT_NAMES]),
    ("Agent programs (matrix suites only)", [(name, name) for name in PROGRAM_NAMES]),
]


class JobForm(forms.ModelForm):
    """Queue a job; `server` offers the inference servers the approved hosts reported.

    Where the job runs (its pool, and a picked server's URL and model) is decided by
    services.place_job, which the API's serializer calls too.
    """

    server = forms.ChoiceField(
        required=False,
        label="Server on a lab host",
        help_text="A server an approved host reported: the job runs on that host, on the model "
        "the server names.",
    )
    launch_flags_text = forms.CharField(
        required=False,
        label="Extra llama-server flags",
        help_text="e.g. --cache-type-k q8_0 -fa on",
    )
    suites_text = forms.CharField(
        required=False,
        label="Suites (instead of a profile)",
        help_text="comma-separated, e.g. speed,toolcall",
    )

    # (legend, fields): the template renders one fieldset each, in this order.
    FIELDSETS = [
        ("Where it runs", ["server", "pool", "priority"]),
        ("What to benchmark", ["target", "model"]),
        ("Endpoint", ["endpoint_url", "provider", "api_key_ref"]),
        (
            "Managed llama.cpp server",
            ["binary", "model_path", "context_length", "threads", "launch_flags_text"],
        ),
        (
            "What to run",
            [
                "profile",
                "suites_text",
                "trials",
                "harness",
                "harness_variant",
                "max_tokens",
                "thinking_budget",
            ],
        ),
    ]

    class Meta:
        model = BenchmarkJob
        fields = [
            "target",
            "model",
            "endpoint_url",
            "provider",
            "api_key_ref",
            "binary",
            "model_path",
            "context_length",
            "threads",
            "profile",
            "trials",
            "harness",
            "harness_variant",
            "max_tokens",
            "thinking_budget",
            "pool",
            "priority",
        ]
        labels = {
            "target": "Target",
            "model": "Model",
            "endpoint_url": "Endpoint URL",
            "provider": "API",
            "api_key_ref": "API key reference",
            "binary": "Server binary",
            "model_path": "Model file on the host",
            "context_length": "Context length (tokens)",
            "threads": "CPU threads",
            "profile": "Profile",
            "trials": "Speed trials",
            "harness": "Harness",
            "harness_variant": "Harness variant",
            "max_tokens": "Answer token limit",
            "thinking_budget": "Thinking budget",
            "pool": "Pool",
            "priority": "Priority",
        }
        help_texts = {
            "model": "The model id the server serves. Leave it empty when you pick a server "
            "above: the server names its model.",
            "endpoint_url": "An OpenAI-compatible or Ollama server the worker can reach.",
            "api_key_ref": "The name of an environment variable on the worker that holds the "
            "key (e.g. LAB_API_KEY); the key itself is never stored here.",
            "binary": "On the host's PATH, or a full path.",
            "model_path": "The GGUF file's path on the host.",
            "pool": "Only pools an approved host serves; not needed when you pick a server.",
            "priority": "0 (low) to 9 (high).",
            "harness": "raw: the engine's own loop. A prompt format offers tools in tags. An "
            "agent program (Aider, Hermes Agent, mini-swe-agent) runs the matrix suites only: "
            + ", ".join(MATRIX_SUITES)
            + " (the matrix profile).",
            "harness_variant": "Only for an agent program: e.g. one of Aider's edit formats. "
            "Empty: the program's default.",
            "max_tokens": "Sets every quality task's answer limit, up or down (at most "
            f"{MAX_TOKENS_CEILING}; speed tasks are only lowered); the run is then not "
            "comparable. Without a thinking budget it is the whole limit: a model that "
            "reasons gets no automatic budget on top.",
            "thinking_budget": "Tokens each quality task may spend thinking, on top of its "
            f"answer limit (0 to {MAX_TOKENS_CEILING}). Empty: automatic, "
            f"{DEFAULT_THINKING_BUDGET} for a model whose warm-up answer reasoned (0 with an "
            "answer token limit), else 0. A budget other than the automatic one makes the "
            "run not comparable.",
        }
        widgets = {
            "target": forms.RadioSelect,
            # A blank profile is the API's "suites instead"; the form has its suites field.
            "profile": forms.Select(choices=PROFILES),
            "harness": forms.Select(choices=HARNESS_CHOICES),
            "pool": forms.Select,
            # The model's validator refuses more; this lets the browser say so first.
            "thinking_budget": forms.NumberInput(attrs={"max": MAX_TOKENS_CEILING}),
        }

    def __init__(
        self,
        *args,
        servers: list[tuple[str, str]] | None = None,
        pools: list[str] | None = None,
        **kwargs,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.placement: Placement | None = None
        # Declared above as a ChoiceField.
        server = cast(forms.ChoiceField, self.fields["server"])
        server.choices = [("", "— none, use the pool below")] + (servers or [])
        # A CharField behind a select: a pool no host serves gets place_job's message, not
        # "select a valid choice".
        self.fields["pool"].required = False
        self.fields["pool"].initial = ""
        offered = list(pools or [])
        posted = self.data.get("pool") if self.is_bound else ""
        if posted and posted not in offered:
            offered.append(posted)  # still shown beside the error that refuses it
        self.fields["pool"].widget.choices = [("", "— the picked server's host")] + [
            (pool, pool) for pool in offered
        ]
        self.fields["model"].required = False

    def fieldsets(self) -> list[tuple[str, list]]:
        return [(legend, [self[name] for name in names]) for legend, names in self.FIELDSETS]

    def clean(self) -> dict:
        from django.core.exceptions import ValidationError

        from lab.services import place_job

        super().clean()
        data = self.cleaned_data
        try:
            self.instance.launch_flags = shlex.split(data.get("launch_flags_text") or "")
        except ValueError as exc:
            self.add_error("launch_flags_text", f"cannot split these flags: {exc}")
        self.instance.suites = [
            s.strip() for s in (data.get("suites_text") or "").split(",") if s.strip()
        ]
        server_url, server_model, host_name = "", "", ""
        if data.get("server"):
            server_url, server_model, host_name = data["server"].split("|", 2)
        elif not data.get("model"):
            self.add_error("model", "Name the model, or pick a server above that names it.")
        fields = {name: data.get(name) for name in self.Meta.fields if name in data}
        try:
            self.placement = place_job(
                fields=fields, host_name=host_name, server_url=server_url, server_model=server_model
            )
        except ValidationError as exc:
            for field, problems in exc.message_dict.items():
                for problem in problems:
                    self.add_error(field if field in self.fields else None, problem)
            return data
        data.update(self.placement.fields)
        # Whether the target has its URL or model path is BenchmarkJob.clean's to say.
        return data


class QuickPromptForm(forms.Form):
    server = forms.ChoiceField(label="Model")
    prompt = forms.CharField(
        max_length=4000,
        widget=forms.Textarea(attrs={"rows": 3}),
        initial="In one sentence, what is a GPU?",
    )

    def __init__(self, *args, servers: list[tuple[str, str]], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["server"]).choices = servers  # declared above


class NotificationForm(forms.ModelForm):
    webhook_url = forms.URLField(
        required=False,
        label="Webhook URL",
        assume_scheme="https",
        help_text="We POST a signed JSON body here when a job ends.",
    )

    class Meta:
        model = NotificationSettings
        fields = ["email_on_finish", "webhook_url"]

    def clean_webhook_url(self) -> str:
        from lab.notifications import webhook_address_problem

        url = self.cleaned_data.get("webhook_url") or ""
        problem = webhook_address_problem(url) if url else None
        if problem:
            raise forms.ValidationError(problem[0].upper() + problem[1:] + ".")
        return url


class HostKeyForm(forms.Form):
    host_name = forms.CharField(
        max_length=100,
        label="Host name",
        help_text="the host's BENCHLOOP_LAB_HOST; its agent speaks for this host only",
    )
    scopes = forms.MultipleChoiceField(
        choices=[
            ("agent", "agent: register, claim jobs of its pools, stream progress"),
            ("verify", "verify: its runs are published as verified lab runs"),
        ],
        initial=["agent", "verify"],
        widget=forms.CheckboxSelectMultiple,
    )
