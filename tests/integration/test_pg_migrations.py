"""ragmesh_common.pg against the real PostgreSQL: schema-scoped pools and once-only migrations."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import pytest

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.pg import applied_migrations, apply_migrations, create_pool, discover_migrations


def write_migrations(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, sql in files.items():
        (folder / name).write_text(sql, encoding="utf-8")
    return folder


async def test_pool_creates_schema_and_scopes_search_path(pg_url, unique_schema):
    schema = unique_schema()
    pool = await create_pool(pg_url, schema=schema)
    try:
        assert await pool.fetchval("SELECT current_schema()") == schema
        await pool.execute("CREATE TABLE things (id int)")
        query = "SELECT count(*) FROM pg_tables WHERE tablename = 'things' AND schemaname = $1"
        assert await pool.fetchval(query, schema) == 1
        assert await pool.fetchval(query, "public") == 0
        # json/jsonb round-trip as Python objects
        assert await pool.fetchval("SELECT $1::jsonb", {"a": [1, 2]}) == {"a": [1, 2]}
    finally:
        await pool.close()


async def test_migrations_apply_in_order_once(pg_url, unique_schema, tmp_path):
    schema = unique_schema()
    folder = write_migrations(tmp_path / "m", {
        "0002_add_col.sql": "ALTER TABLE items ADD COLUMN label text NOT NULL DEFAULT 'x';",
        "0001_init.sql": "CREATE TABLE items (id int PRIMARY KEY);\nINSERT INTO items VALUES (1);",
        "README.md": "not a migration",
        "0003_bad-name.sql": "SELECT 1/0;",  # does not match NNNN_name.sql: ignored
    })
    pool = await create_pool(pg_url, schema=schema)
    try:
        applied = await apply_migrations(pool, schema=schema, migrations_dir=folder)
        assert applied == ["0001_init", "0002_add_col"]
        assert await apply_migrations(pool, schema=schema, migrations_dir=folder) == []
        assert await pool.fetchval("SELECT label FROM items WHERE id = 1") == "x"
        assert await applied_migrations(pool, schema=schema) == ["0001_init", "0002_add_col"]

        write_migrations(folder, {"0003_more.sql": "INSERT INTO items VALUES (2, 'y');"})
        assert await apply_migrations(pool, schema=schema, migrations_dir=folder) == ["0003_more"]
        assert await pool.fetchval("SELECT count(*) FROM items") == 2
    finally:
        await pool.close()


async def test_failing_migration_rolls_back_everything(pg_url, unique_schema, tmp_path):
    schema = unique_schema()
    folder = write_migrations(tmp_path / "m", {
        "0001_ok.sql": "CREATE TABLE ok (id int);",
        "0002_broken.sql": "CREATE TABLE broken (id int); SELECT no_such_function();",
    })
    pool = await create_pool(pg_url, schema=schema)
    try:
        with pytest.raises(asyncpg.UndefinedFunctionError):
            await apply_migrations(pool, schema=schema, migrations_dir=folder)
        assert await pool.fetchval("SELECT to_regclass($1)", f"{schema}.ok") is None
        assert await applied_migrations(pool, schema=schema) == []
    finally:
        await pool.close()


async def test_changed_applied_migration_is_refused(pg_url, unique_schema, tmp_path):
    schema = unique_schema()
    folder = write_migrations(tmp_path / "m", {"0001_init.sql": "CREATE TABLE a (id int);"})
    pool = await create_pool(pg_url, schema=schema)
    try:
        await apply_migrations(pool, schema=schema, migrations_dir=folder)
        write_migrations(folder, {"0001_init.sql": "CREATE TABLE a (id bigint);"})
        with pytest.raises(RagmeshError) as err:
            await apply_migrations(pool, schema=schema, migrations_dir=folder)
        assert "0001_init" in err.value.message
    finally:
        await pool.close()


async def test_concurrent_appliers_apply_each_migration_once(pg_url, unique_schema, tmp_path):
    schema = unique_schema()
    # Not idempotent on purpose: a second run of 0001 would fail with "relation already exists", and
    # the counter table shows how many times 0002 ran.
    folder = write_migrations(tmp_path / "m", {
        "0001_init.sql": "CREATE TABLE runs (n int); SELECT pg_sleep(0.2);",
        "0002_count.sql": "INSERT INTO runs VALUES (1);",
    })
    pools = [await create_pool(pg_url, schema=schema) for _ in range(4)]
    try:
        results = await asyncio.gather(
            *(apply_migrations(pool, schema=schema, migrations_dir=folder) for pool in pools)
        )
        assert sorted(results, key=len) == [[], [], [], ["0001_init", "0002_count"]]
        assert await pools[0].fetchval("SELECT count(*) FROM runs") == 1
    finally:
        for pool in pools:
            await pool.close()


async def test_schemas_are_isolated(pg_url, unique_schema, tmp_path):
    first, second = unique_schema(), unique_schema()
    folder = write_migrations(tmp_path / "m", {"0001_init.sql": "CREATE TABLE shared_name (v text);"})
    pool_a = await create_pool(pg_url, schema=first)
    pool_b = await create_pool(pg_url, schema=second)
    try:
        await apply_migrations(pool_a, schema=first, migrations_dir=folder)
        await apply_migrations(pool_b, schema=second, migrations_dir=folder)
        await pool_a.execute("INSERT INTO shared_name VALUES ('a')")
        assert await pool_b.fetchval("SELECT count(*) FROM shared_name") == 0
    finally:
        await pool_a.close()
        await pool_b.close()


def test_invalid_schema_name_and_duplicate_numbers_are_refused(tmp_path):
    with pytest.raises(RagmeshError) as err:
        asyncio.run(create_pool("postgresql://unused", schema="Bad; DROP"))
    assert err.value.code is ErrorCode.INVALID_ARGUMENT
    folder = write_migrations(tmp_path / "m", {"0001_a.sql": "", "0001_b.sql": ""})
    with pytest.raises(RagmeshError):
        discover_migrations(folder)


async def test_unreachable_server_is_unavailable(free_port):
    with pytest.raises(RagmeshError) as err:
        await create_pool(f"postgresql://postgres@127.0.0.1:{free_port()}/postgres", schema="x")
    assert err.value.code is ErrorCode.UNAVAILABLE
