// The query editor: checks the text as you type (POST api/check runs the same parser and rules as
// `csparql register`), marks each problem at its line and column, and previews the plan and next windows.
// Everything from the server is inserted as text (textContent), never as HTML.
(function () {
  "use strict";
  var text = document.getElementById("query-text");
  if (!text) return;
  var base = document.body.dataset.base;
  var form = document.getElementById("editor-form");
  var gutter = document.getElementById("gutter");
  var backdrop = document.getElementById("backdrop");
  var problems = document.getElementById("problems");
  var status = document.getElementById("check-status");
  var preview = document.getElementById("preview");
  var nameInput = document.getElementById("name");
  var upload = document.getElementById("upload");
  var save = document.getElementById("save");
  var mayWrite = save && !save.disabled;
  var mode = form.dataset.mode;
  var timer = null;
  var sequence = 0;

  function element(tag, className, content) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (content !== undefined) node.textContent = content;
    return node;
  }

  function lines() {
    return text.value.split("\n");
  }

  function byLine(found) {
    var map = new Map();
    found.forEach(function (problem) {
      if (!problem.line) return;
      if (!map.has(problem.line)) map.set(problem.line, []);
      map.get(problem.line).push(problem);
    });
    return map;
  }

  function drawGutter(found) {
    var marks = byLine(found);
    gutter.replaceChildren();
    lines().forEach(function (_, index) {
      var number = element("div", "", String(index + 1));
      var here = marks.get(index + 1);
      if (here) {
        number.className = "error";
        number.title = here.map(function (p) { return p.message; }).join("\n");
      }
      gutter.appendChild(number);
    });
    syncScroll();
  }

  // The backdrop repeats the text, invisible, with a <mark> under each problem's span.
  function drawBackdrop(found) {
    var marks = byLine(found);
    backdrop.replaceChildren();
    lines().forEach(function (line, index) {
      var here = (marks.get(index + 1) || []).slice().sort(function (a, b) { return a.column - b.column; });
      var position = 0;
      here.forEach(function (problem) {
        var start = Math.max(position, problem.column - 1);
        var end = Math.max(start, Math.min(line.length, problem.column - 1 + (problem.length || 1)));
        if (start > position) backdrop.appendChild(document.createTextNode(line.slice(position, start)));
        var mark = element("mark", "error", end > start ? line.slice(start, end) : " ");
        mark.dataset.line = String(index + 1);
        mark.title = problem.message;
        backdrop.appendChild(mark);
        position = Math.max(position, end);
      });
      backdrop.appendChild(document.createTextNode(line.slice(position) + "\n"));
    });
    syncScroll();
  }

  function syncScroll() {
    backdrop.scrollTop = text.scrollTop;
    backdrop.scrollLeft = text.scrollLeft;
    gutter.scrollTop = text.scrollTop;
  }

  function offsetOf(line, column) {
    var all = lines();
    var offset = 0;
    for (var i = 0; i < line - 1 && i < all.length; i++) offset += all[i].length + 1;
    return offset + Math.max(0, column - 1);
  }

  function goTo(problem) {
    var start = offsetOf(problem.line, problem.column);
    text.focus();
    text.setSelectionRange(start, start + (problem.length || 1));
    var top = (problem.line - 3) * 20;
    text.scrollTop = Math.max(0, top);
    syncScroll();
  }

  function drawProblems(found) {
    problems.replaceChildren();
    found.forEach(function (problem) {
      var item = element("li");
      if (problem.line) {
        var link = element("a", "", "Line " + problem.line + ", column " + problem.column);
        link.href = "#";
        link.dataset.line = String(problem.line);
        link.addEventListener("click", function (event) { event.preventDefault(); goTo(problem); });
        item.appendChild(link);
        item.appendChild(document.createTextNode(": " + problem.message));
      } else {
        item.textContent = problem.message;
      }
      if (problem.rendered && problem.line) item.appendChild(element("pre", "", problem.rendered));
      problems.appendChild(item);
    });
  }

  function drawPreview(answer) {
    if (!answer.ok) {
      preview.hidden = true;
      return;
    }
    preview.hidden = false;
    var description = answer.description || "";
    if (answer.output_stream) description += "; writes the stream <" + answer.output_stream + ">";
    document.getElementById("preview-description").textContent = description;
    document.getElementById("plan").textContent = answer.optimized || "";
    document.getElementById("algebra").textContent = answer.algebra || "";
    var rows = document.querySelector("#next-runs tbody");
    rows.replaceChildren();
    if (!answer.next_runs.length) {
      var row = element("tr");
      var cell = element("td", "", "No schedule: a one-shot query runs when its DAG is triggered.");
      cell.colSpan = 3;
      row.appendChild(cell);
      rows.appendChild(row);
    }
    answer.next_runs.forEach(function (run) {
      var row = element("tr");
      row.appendChild(element("td", "", "(" + run.window_start + ", " + run.window_end + "]"));
      row.appendChild(element("td", "", run.at));
      row.appendChild(element("td", "", run.waits_for.join("; ") || "nothing"));
      rows.appendChild(row);
    });
  }

  function showStatus(answer) {
    var message;
    if (answer.ok) {
      message = "✓ Valid: " + answer.form + " query " + answer.name;
      if (answer.schedule) message += ", evaluated " + answer.schedule;
      if (mode === "register" && answer.registered) {
        message += ". A query named " + answer.registered.name + " is already registered: choose another name, or edit it";
      }
    } else {
      message = answer.problems.length === 1 ? "1 problem" : answer.problems.length + " problems";
    }
    status.textContent = message;
    status.className = answer.ok && !(mode === "register" && answer.registered) ? "ok" : "bad";
    if (nameInput && mode === "register" && answer.name && !nameInput.value) nameInput.placeholder = answer.name;
    if (save) save.disabled = !mayWrite || !answer.ok || (mode === "register" && !!answer.registered);
  }

  function check() {
    var mine = ++sequence;
    if (!text.value.trim()) { // nothing to check yet: the editor starts empty
      drawGutter([]);
      drawBackdrop([]);
      drawProblems([]);
      preview.hidden = true;
      status.textContent = "";
      status.className = "";
      if (save) save.disabled = true;
      return;
    }
    status.textContent = "checking…";
    status.className = "";
    fetch(base + "/api/check", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "Accept": "application/json" },
      body: JSON.stringify({ text: text.value, name: nameInput ? nameInput.value.trim() : "" }),
    }).then(function (response) {
      return response.json().then(function (answer) { return { response: response, answer: answer }; });
    }).then(function (outcome) {
      if (mine !== sequence) return; // a later check is on its way
      if (!outcome.response.ok) {
        status.textContent = "Could not check: " + (outcome.answer.detail || outcome.response.status);
        status.className = "bad";
        return;
      }
      var answer = outcome.answer;
      drawGutter(answer.problems);
      drawBackdrop(answer.problems);
      drawProblems(answer.problems);
      drawPreview(answer);
      showStatus(answer);
    }).catch(function (error) {
      if (mine !== sequence) return;
      status.textContent = "Could not check: " + error;
      status.className = "bad";
    });
  }

  function later() {
    drawGutter([]);
    drawBackdrop([]);
    window.clearTimeout(timer);
    timer = window.setTimeout(check, 300);
  }

  text.addEventListener("input", later);
  text.addEventListener("scroll", syncScroll);
  if (nameInput && nameInput.type !== "hidden") nameInput.addEventListener("input", later);
  text.addEventListener("keydown", function (event) {
    if (event.key === "Tab" && !event.shiftKey && !event.ctrlKey && !event.metaKey && !event.altKey) {
      event.preventDefault(); // indent instead of leaving the editor
      var start = text.selectionStart;
      text.setRangeText("  ", start, text.selectionEnd, "end");
      later();
    }
  });
  if (upload) {
    upload.addEventListener("change", function () {
      var file = upload.files && upload.files[0];
      if (!file) return;
      file.text().then(function (content) {
        text.value = content.replace(/^\uFEFF/, "");
        upload.value = ""; // the text field now holds it, edits included
        later();
      });
    });
  }
  var insertExample = document.getElementById("insert-example");
  if (insertExample) {
    insertExample.addEventListener("click", function () {
      text.value = insertExample.dataset.example;
      text.focus();
      later();
    });
  }
  drawGutter([]);
  drawBackdrop([]);
  check();
})();
