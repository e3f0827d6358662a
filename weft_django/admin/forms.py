"""The admin's forms: the run page's send-signal form (a name and a JSON payload,
validated before anything is stored; the signal goes through
:func:`weft_django.operations.signal`), and the optional reason every
operation records (the action bar's, the confirmation pages' and the run
page's)."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib.admin import helpers
from django.utils.translation import gettext_lazy as _

from ..exceptions import PayloadError
from ..operations import MAX_REASON_LENGTH
from ..runtime.payload import SIGNAL_ID, SIGNAL_NAME, check_id, encode
from ..stored_json import MAX_PAYLOAD_DEPTH, json_text_depth

#: The largest payload the admin form accepts (the API's own limit may be higher).
MAX_FORM_PAYLOAD_BYTES = 64 * 1024


def reason_field() -> forms.CharField:
    return forms.CharField(
        label=_("Reason (optional)"),
        max_length=MAX_REASON_LENGTH,
        required=False,
        widget=forms.TextInput(attrs={"size": 60}),
        help_text=_("Recorded with the operation: the run's history and the log."),
    )


class ReasonForm(forms.Form):
    """The optional reason of an operation (confirmation pages, the run page)."""

    reason = reason_field()


class RunActionForm(helpers.ActionForm):
    """The run list's action bar, with the optional reason the actions record."""

    reason = reason_field()


class SendSignalForm(forms.Form):
    name = forms.CharField(
        label=_("Signal name"),
        max_length=255,
        strip=False,
        help_text=_("Exactly as the workflow waits for it (case-sensitive)."),
    )
    payload = forms.CharField(
        label=_("Payload (JSON)"),
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 4, "cols": 60, "spellcheck": "false"}),
        help_text=_(
            "Any JSON value, at most 64 KiB and 30 levels deep (lists and objects); "
            "empty means null."
        ),
    )
    signal_id = forms.CharField(
        label=_("Signal id (optional)"),
        max_length=255,
        required=False,
        strip=False,
        help_text=_("Makes a repeated submission a no-op."),
    )
    reason = reason_field()

    def clean_name(self) -> str:
        name: str = self.cleaned_data["name"]
        try:
            check_id(name, "signal name", SIGNAL_NAME)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None
        return name

    def clean_signal_id(self) -> str | None:
        signal_id: str = self.cleaned_data.get("signal_id") or ""
        if not signal_id:
            return None
        try:
            check_id(signal_id, "signal_id", SIGNAL_ID)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None
        return signal_id

    def clean_payload(self) -> Any:
        text: str = self.cleaned_data.get("payload") or ""
        if len(text.encode("utf-8")) > MAX_FORM_PAYLOAD_BYTES:
            raise forms.ValidationError(
                _("The payload is over %(limit)d bytes."), params={"limit": MAX_FORM_PAYLOAD_BYTES}
            )
        if not text.strip():
            return None
        # Measured on the text, before parsing: deep text must not reach json.loads.
        depth = json_text_depth(text)
        if depth > MAX_PAYLOAD_DEPTH:
            raise forms.ValidationError(
                _("The payload is nested %(depth)d levels deep, over the limit of %(limit)d."),
                params={"depth": depth, "limit": MAX_PAYLOAD_DEPTH},
            )
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise forms.ValidationError(
                _("Not valid JSON: %(error)s"), params={"error": exc}
            ) from None
        try:
            return encode(value, "signal payload", max_bytes=MAX_FORM_PAYLOAD_BYTES)
        except PayloadError as exc:
            raise forms.ValidationError(str(exc)) from None
