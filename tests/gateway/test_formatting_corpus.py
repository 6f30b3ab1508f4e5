"""A regression corpus of realistic model replies, rendered for every dialect at real and small limits.

Every sample must: fit each platform's limit chunk by chunk (Telegram in UTF-16
units), give valid balanced Telegram HTML, balance fences in every chunk, and lose
no text. New shapes of model output that broke delivery belong here.
"""

from __future__ import annotations

import pytest

from adapters.contract import Markup
from gateway.delivery.formatting import render
from tests.gateway.test_formatting_checks import LIMITS, check_chunks

PYTHON_ANSWER = '''Sure! Here's a function that reads a CSV file and returns the rows as dictionaries:

```python
import csv
from pathlib import Path


def read_rows(path: Path) -> list[dict[str, str]]:
    """Return every row of *path* as a dict keyed by the header."""
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))
```

**How it works:**

1. `csv.DictReader` uses the first row as the keys.
2. `newline=""` lets the `csv` module handle line endings itself.
3. The `with` block closes the file even if parsing fails.

> **Tip:** for very large files, iterate over the reader instead of calling `list()`.
'''

SEVERAL_LANGUAGES = """To deploy, run these steps.

First install the dependencies:

```bash
npm ci && npm run build
export API_URL="https://api.example.com" # no trailing slash
```

Then configure the service (`config.json`):

```json
{"port": 8080, "features": ["auth", "cache"], "limits": {"rps": 50}}
```

The handler in TypeScript:

```ts
export async function handler(req: Request): Promise<Response> {
  const body = await req.json() as { name?: string };
  return new Response(`Hello, ${body.name ?? "world"}!`, { status: 200 });
}
```

And the query you asked about:

```sql
SELECT id, name FROM users WHERE created_at > NOW() - INTERVAL '7 days' AND status <> 'banned';
```
"""

TABLE = """Here's a quick comparison:

| Feature | SQLite | PostgreSQL |
|---|:---:|---:|
| Setup | **none** | server |
| Concurrency | single writer | MVCC |
| JSON | `json1` | `jsonb` |
| Max DB size | 281 TB | unlimited* |

*Practically limited by storage.
"""

WIDE_TABLE = """| Model | Context window | Strengths | Weaknesses |
|-------|----------------|-----------|------------|
| Alpha | 128k tokens | Fast, cheap, good at summarising long documents | Weaker at multi-step maths |
| Beta | 200k tokens | Careful reasoning, strong code review | Slower and more expensive per token |
| Gamma | 32k | [Open weights](https://example.com/gamma) | Needs your own GPUs |
"""

NESTED_LISTS = """Plan for the migration:

1. **Prepare**
   - Back up the database
     - Full dump: `pg_dump -Fc app > app.dump`
     - Verify the dump restores on staging
   - Announce the maintenance window
2. **Migrate**
   1. Stop the workers
   2. Run the migration:
      ```bash
      alembic upgrade head
      ```
   3. Start the workers again
3. **Verify**
   * Check error rates
   * Spot-check *recent* orders
   - [x] dashboards updated
   - [ ] on-call notified
"""

CJK_EMOJI = """## 总结 🎉

这是**重要**的一点：缓存必须在写入后失效。请参考「设计文档」第３节。👍🏽

日本語の説明：このライブラリは**非同期**で動作します。🚀🚀🚀

- 优点：速度快、内存占用低 🐇
- 缺点：配置比较*复杂* 🇯🇵🇫🇷
- 한국어도 지원합니다 👩‍💻

Emoji-heavy line: 😀😃😄😁😆😅🤣😂🙂🙃😉😊😇🥰😍🤩😘😗☺️😚😙🥲😋😛😜🤪😝🤑🤗🤭🫢🫣🤫🤔
"""

TAGS_AND_AMPERSANDS = """In HTML you would write <div class="note">Hello</div> & then close it.
Never trust input like <script>alert("x")</script> or <img src=x onerror=alert(1)>.
AT&T, R&D and Q&A use ampersands; &amp; is already an entity and &nbsp; is not supported.
Comparisons: 3 < 5 > 2, and the arrow -> or => or <- shows direction.
Generic types look like List<Map<String, Integer>> in Java.
"""

IDENTIFIERS = """Set `MAX_RETRIES` in settings.py, then call retry_with_backoff(max_retries=3).
The __init__ method runs first; __name__ == "__main__" guards scripts.
Functions take *args and **kwargs; my_var_name and _private_field are conventions.
The file is called test_user_model_v2.py and the env var is APP_DB_URL.
"""

MATH = """Quick arithmetic: 2*3=6, 2*3*4 = 24 and 5 * 4 = 20.
Powers: 2**10 = 1024 and x^2 + y^2 = z^2.
**Note:** a*b*c is associative, so (a*b)*c = a*(b*c).
Percentages: 50% of 30 is 15; 3 * 5 * 7 = 105.
"""

LINKS = """See [Python (programming language)](https://en.wikipedia.org/wiki/Python_(programming_language)) for history.
Docs live at https://docs.python.org/3/library/asyncio-task.html#asyncio.gather and <https://peps.python.org/pep-0008/>.
A URL with underscores https://example.com/some_path_with_underscores_here?x=1&y=2 should stay intact.
Mail me at <ops@example.com> or [open an issue](https://github.com/org/repo/issues/new?title=Bug%20(login)).
Unsafe: [click](javascript:alert(1)) and relative [docs](/docs/intro).
"""

UNCLOSED_FENCE = """Here is the start of the script:

```python
def main() -> None:
    for attempt in range(3):
        print(f"attempt {attempt}")
"""

FENCE_IN_STRING = """Python can hold a Markdown fence in a string:

```python
FENCE = "```"
template = f"{FENCE}python\\nprint('hi')\\n{FENCE}"
print(template)
```

And a Markdown example inside a longer fence:

````markdown
```js
console.log("nested");
```
````

Done.
"""

QUOTES_AND_SPOILERS = """> **Warning:** this deletes data.
> Run it on a copy first.

The answer is ||42|| and the old value was ~~41~~.

> Nested quotes
>> are flattened
>>> for chat platforms.
"""

SLACK_ENTITIES = """<@U024BE7LH> asked about it in <#C024BE91L|general>.
<!here> the deploy is done. See <https://deploy.example.com/runs/42|run 42>.
On Discord: <@123456789> in <#987654321> at <t:1700000000:R> <:party:112233>.
"""

HEADINGS_AND_RULES = """# Release notes

## New
### Faster startup
#### Small print

---

Setext heading
==============

Text after a rule.

***

Last line.
"""

LONG_CODE_BLOCK = (
    "Full listing:\n\n```python\n"
    + "\n".join(
        f"def handler_{n}(event: dict) -> dict:\n    return {{'id': {n}, 'ok': event.get('ok', True)}}  # <{n}> & done"
        for n in range(90)
    )
    + "\n```\n\nThat's all."
)


def _long_answer() -> str:
    parts = ["# A long answer\n"]
    for n in range(1, 17):
        parts.append(f"## Part {n}\n")
        parts.append(
            f"In part {n} we look at **caching**, *consistency* and `retries`. " * 7
            + "Each step matters because errors compound over time. " * 3
        )
        parts.append(f"- point {n}.1 with snake_case_name\n- point {n}.2 with 2*3*4\n  - detail {n}.2.1 🚀")
        if n % 3 == 0:
            parts.append(f"```go\nfunc step{n}() error {{\n\treturn nil // <ok> & done\n}}\n```")
    return "\n\n".join(parts)


LONG_ANSWER = _long_answer()

CORPUS = {
    "python_answer": PYTHON_ANSWER,
    "several_languages": SEVERAL_LANGUAGES,
    "table": TABLE,
    "wide_table": WIDE_TABLE,
    "nested_lists": NESTED_LISTS,
    "cjk_emoji": CJK_EMOJI,
    "tags_and_ampersands": TAGS_AND_AMPERSANDS,
    "identifiers": IDENTIFIERS,
    "math": MATH,
    "links": LINKS,
    "unclosed_fence": UNCLOSED_FENCE,
    "fence_in_string": FENCE_IN_STRING,
    "quotes_and_spoilers": QUOTES_AND_SPOILERS,
    "slack_entities": SLACK_ENTITIES,
    "headings_and_rules": HEADINGS_AND_RULES,
    "long_code_block": LONG_CODE_BLOCK,
    "long_answer": LONG_ANSWER,
}
DIALECTS = [Markup.TELEGRAM_HTML, Markup.DISCORD_MARKDOWN, Markup.SLACK_MRKDWN, Markup.PLAIN]


@pytest.mark.parametrize("markup", DIALECTS)
@pytest.mark.parametrize("name", CORPUS)
def test_corpus_at_platform_limits(name: str, markup: Markup) -> None:
    limit, unit = LIMITS[markup]
    check_chunks(CORPUS[name], markup, limit, unit)


@pytest.mark.parametrize("limit", [120, 333])
@pytest.mark.parametrize("markup", DIALECTS)
@pytest.mark.parametrize("name", CORPUS)
def test_corpus_at_small_limits(name: str, markup: Markup, limit: int) -> None:
    check_chunks(CORPUS[name], markup, limit, "utf16" if markup == Markup.TELEGRAM_HTML else "chars")


def test_long_answer_is_split_not_truncated() -> None:
    assert len(LONG_ANSWER) > 10_000
    for markup in DIALECTS:
        limit, unit = LIMITS[markup]
        chunks = render(LONG_ANSWER, markup, max_length=limit, length_unit=unit)
        assert len(chunks) >= 3
        joined = "".join(chunk.plain for chunk in chunks)
        assert all(f"Part {n}\n" in joined for n in range(1, 17))


def test_long_code_block_reopens_its_language_in_every_chunk() -> None:
    chunks = render(LONG_CODE_BLOCK, Markup.DISCORD_MARKDOWN, max_length=2000, length_unit="chars")
    code_chunks = [chunk.text for chunk in chunks if "def handler_" in chunk.text]
    assert len(code_chunks) >= 3
    assert all("```python\n" in text and text.rstrip().endswith("```") for text in code_chunks[:-1])


def test_fence_inside_a_string_stays_inside_the_code_block() -> None:
    html = render(FENCE_IN_STRING, Markup.TELEGRAM_HTML, max_length=4096, length_unit="utf16")[0].text
    assert 'FENCE = "```"' in html
    assert '<pre><code class="language-markdown">```js\nconsole.log("nested");\n```</code></pre>' in html
    discord = render(FENCE_IN_STRING, Markup.DISCORD_MARKDOWN, max_length=2000, length_unit="chars")[0].text
    assert discord.count("```") == 4  # two code blocks, each opened and closed once


def test_tags_and_ampersands_are_shown_not_interpreted() -> None:
    html = render(TAGS_AND_AMPERSANDS, Markup.TELEGRAM_HTML, max_length=4096, length_unit="utf16")[0].text
    assert "&lt;script&gt;" in html and "AT&amp;T" in html and "&amp;amp;" in html and "&amp;nbsp;" in html


def test_identifiers_and_math_keep_every_marker() -> None:
    for sample in (IDENTIFIERS, MATH):
        plain = render(sample, Markup.TELEGRAM_HTML, max_length=4096, length_unit="utf16")[0].plain
        for token in ("__init__", "__name__", "**kwargs", "2*3=6", "2*3*4", "2**10", "a*b*c", "test_user_model_v2.py"):
            if token in sample:
                assert token in plain, token
