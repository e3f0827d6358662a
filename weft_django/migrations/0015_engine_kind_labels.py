"""``Engine.kind``: each choice's label is its value (``worker``, ``celery``,
``test``, ``other``), the one word the admin, ``weft_marker`` and the docs use.
Only the choices change; no stored value does."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("weft_django", "0014_pass_summaries"),
    ]

    operations = [
        migrations.AlterField(
            model_name="engine",
            name="kind",
            field=models.CharField(
                choices=[
                    ("worker", "worker"),
                    ("celery", "celery"),
                    ("test", "test"),
                    ("other", "other"),
                ],
                max_length=16,
            ),
        ),
    ]
