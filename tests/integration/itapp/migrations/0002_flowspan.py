from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("itapp", "0001_initial")]

    operations = [
        migrations.CreateModel(
            name="FlowSpan",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("run_id", models.CharField(max_length=255)),
                ("key", models.CharField(max_length=64)),
                ("pid", models.PositiveIntegerField()),
                ("started", models.FloatField()),
                ("ended", models.FloatField(null=True)),
            ],
            options={"ordering": ["id"]},
        ),
    ]
