from __future__ import annotations

from typing import Any, cast

from django import forms
from django.contrib.auth.forms import UserCreationForm
from django.contrib.auth.models import User
from django.contrib.auth.validators import ASCIIUsernameValidator
from django.db.models import QuerySet

from runs.names import RESERVED, skeleton
from submissions.models import AcceleratorOverride, ApiKey, Status, Submission


class SignupForm(UserCreationForm):
    """Never says whether an email is registered (submissions.accounts decides what to mail);
    usernames are public, so a taken or reserved one is refused as such."""

    email = forms.EmailField(
        required=True, help_text="We mail a link to confirm it. Never shown to anyone."
    )

    class Meta:
        model = User
        fields = ("username", "email")
        help_texts = {
            "username": "Shown publicly next to your runs. Letters, digits and @ . + - _ only."
        }

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # ASCII only: a new name cannot hide a Cyrillic or Greek letter that looks Latin.
        self.fields["username"].validators.append(ASCIIUsernameValidator())

    def clean_username(self) -> str:
        username = super().clean_username()
        if username and skeleton(username) in reserved_skeletons():
            raise forms.ValidationError(
                "This name is reserved or belongs to an imported submitter; choose another."
            )
        return username

    def clean_email(self) -> str:
        return self.cleaned_data["email"].lower()


def reserved_skeletons() -> set[str]:
    """Skeletons of the reserved words and of every imported author's name."""
    imported = (
        Submission.objects.filter(submitter__isnull=True)
        .exclude(submitter_name="")
        .values_list("submitter_name", flat=True)
        .distinct()
    )
    return {skeleton(name) for name in (*RESERVED, *imported)}


class ApiKeyForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="e.g. “workstation” or “lab-runner-3”")
    scopes = forms.MultipleChoiceField(
        choices=[(scope, scope) for scope in ApiKey.SCOPES],
        initial=["submit", "read"],
        widget=forms.CheckboxSelectMultiple,
        help_text="submit: upload runs · read: higher read-API limits",
    )


class DeviceCodeForm(forms.Form):
    code = forms.CharField(max_length=12, label="Code shown by benchloop login")


class DecisionForm(forms.Form):
    submissions: forms.ModelMultipleChoiceField[Submission] = forms.ModelMultipleChoiceField(
        queryset=None, widget=forms.MultipleHiddenInput
    )
    status = forms.ChoiceField(
        choices=[
            (Status.APPROVED, "Approve"),
            (Status.REJECTED, "Reject"),
            (Status.FLAGGED, "Flag"),
        ]
    )
    reason = forms.CharField(max_length=2000, required=False, widget=forms.TextInput)

    def __init__(self, *args, queryset: QuerySet[Submission] | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Declared above as a ModelMultipleChoiceField.
        field = cast("forms.ModelMultipleChoiceField[Submission]", self.fields["submissions"])
        field.queryset = queryset

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if data.get("status") == Status.REJECTED and not data.get("reason"):
            self.add_error("reason", "Say why: the submitter is told.")
        return data


class ReportForm(forms.Form):
    reason = forms.CharField(
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="What looks wrong? Moderators will look again.",
    )


class AcceleratorForm(forms.Form):
    """A machine the accelerator data lacks; figures from its vendor's spec page."""

    name = forms.CharField(max_length=100, help_text="As the runs name it, e.g. “RTX 4090 D”.")
    kind = forms.ChoiceField(choices=AcceleratorOverride.Kind.choices)
    bandwidth_gbps = forms.FloatField(
        label="Memory bandwidth (GB/s)",
        min_value=1,
        max_value=50_000,
        help_text="CPUs: channels × MT/s × 8 ÷ 1000, for one socket.",
    )
    memory_gb = forms.FloatField(label="Memory (GB)", min_value=0.5, max_value=4096, required=False)
    fp16_tflops = forms.FloatField(
        label="Peak FP16 dense (TFLOPS)", min_value=0.01, max_value=50_000, required=False
    )
    int8_tops = forms.FloatField(
        label="Peak INT8 dense (TOPS)", min_value=0.01, max_value=100_000, required=False
    )
    source = forms.CharField(
        max_length=300, help_text="The vendor's spec page: its title or address."
    )
