from __future__ import annotations

from django import forms
from django.contrib.auth.forms import UserCreationForm
from django.contrib.auth.models import User

from submissions.models import ApiKey, Status


class SignupForm(UserCreationForm):
    email = forms.EmailField(required=True, help_text="For moderation decisions; never shown.")

    class Meta:
        model = User
        fields = ("username", "email")
        help_texts = {"username": "Shown publicly next to your runs."}

    def clean_email(self) -> str:
        email = self.cleaned_data["email"].lower()
        if User.objects.filter(email__iexact=email).exists():
            raise forms.ValidationError("An account with this email already exists.")
        return email


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
    submissions = forms.ModelMultipleChoiceField(queryset=None, widget=forms.MultipleHiddenInput)
    status = forms.ChoiceField(
        choices=[
            (Status.APPROVED, "Approve"),
            (Status.REJECTED, "Reject"),
            (Status.FLAGGED, "Flag"),
        ]
    )
    reason = forms.CharField(max_length=2000, required=False, widget=forms.TextInput)

    def __init__(self, *args, queryset=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["submissions"].queryset = queryset

    def clean(self) -> dict:
        data = super().clean()
        if data.get("status") == Status.REJECTED and not data.get("reason"):
            self.add_error("reason", "Say why: the submitter is told.")
        return data


class ReportForm(forms.Form):
    reason = forms.CharField(
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="What looks wrong? Moderators will look again.",
    )
