from __future__ import annotations

import shlex

from django import forms

from worker.engine.harnesses import HARNESSES
from worker.models import BenchmarkJob, NotificationSettings

PROFILE_CHOICES = [("smoke", "smoke"), ("core", "core"), ("full", "full")]


class JobForm(forms.ModelForm):
    """Queue a job; `server` offers the inference servers the approved hosts reported."""

    server = forms.ChoiceField(
        required=False,
        label="Server on a lab host",
        help_text="Pick one the hosts reported, or type a URL below.",
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
            "max_tokens",
            "pool",
            "priority",
        ]
        widgets = {
            "profile": forms.Select(choices=PROFILE_CHOICES),
            "harness": forms.Select(choices=[(h, h) for h in HARNESSES]),
            "provider": forms.Select(
                choices=[
                    ("auto", "auto-detect"),
                    ("openai", "OpenAI-compatible"),
                    ("ollama", "Ollama"),
                ]
            ),
        }

    def __init__(self, *args, servers: list[tuple[str, str]] | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["server"].choices = [("", "—")] + (servers or [])

    def clean(self) -> dict:
        data = super().clean()
        server = data.get("server")
        if server and not data.get("endpoint_url"):
            data["endpoint_url"] = server.split("|", 1)[0]
            self.instance.endpoint_url = data["endpoint_url"]
        try:
            self.instance.launch_flags = shlex.split(data.get("launch_flags_text") or "")
        except ValueError as exc:
            self.add_error("launch_flags_text", f"cannot split these flags: {exc}")
        self.instance.suites = [
            s.strip() for s in (data.get("suites_text") or "").split(",") if s.strip()
        ]
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
        self.fields["server"].choices = servers


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
        from worker.notifications import webhook_address_problem

        url = self.cleaned_data.get("webhook_url") or ""
        problem = webhook_address_problem(url) if url else None
        if problem:
            raise forms.ValidationError(problem[0].upper() + problem[1:] + ".")
        return url
