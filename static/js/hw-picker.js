/* The "your hardware" menu as a field to type in ("4090", "M4 Max", "24 GB", "CPU").
 *
 * It enhances a plain <select data-hw-picker>: the select stays in the form and is what gets
 * submitted, so the page works the same without JavaScript. data-hw-picker="submit" sends the
 * form once a choice is made (the landing page); "change" only fires the select's change event
 * (the board, where htmx reloads the results). No inline script: the CSP forbids it.
 */
(function () {
  "use strict";

  // "RTX4090 24GB" and "rtx 4090 24 gb" read alike; "2×" is typed "2x".
  function words(text) {
    return text
      .toLowerCase()
      .replace(/×/g, "x")
      .replace(/(\d)\s*gb\b/g, "$1 gb")
      .split(/[^a-z0-9.+]+/)
      .filter(Boolean);
  }

  // Every typed word starts a word of the option (or of its group), or, typed without its
  // spaces ("m4max", "rtx4090"), appears in the option's words run together.
  function matches(query, entry) {
    return query.every(function (token) {
      return (
        entry.words.some(function (word) { return word.indexOf(token) === 0; }) ||
        (token.length >= 4 && entry.compact.indexOf(token) !== -1)
      );
    });
  }

  function enhance(select, n) {
    // A page htmx restored from its history holds a copy of the field without its handlers.
    var stale = select.parentNode.querySelector(".hw-combo");
    if (stale) stale.parentNode.removeChild(stale);
    var mode = select.getAttribute("data-hw-picker");
    var base = select.id || "hw-picker-" + n;
    var label = select.id ? document.querySelector('label[for="' + select.id + '"]') : null;
    var blank = select.querySelector('option[value=""]');

    var box = document.createElement("div");
    box.className = "hw-combo";
    var input = document.createElement("input");
    input.type = "text";
    input.id = base + "-search";
    input.className = "hw-search";
    input.setAttribute("role", "combobox");
    input.setAttribute("aria-autocomplete", "list");
    input.setAttribute("aria-expanded", "false");
    input.setAttribute("aria-controls", base + "-list");
    input.autocomplete = "off";
    input.spellcheck = false;
    input.placeholder =
      select.getAttribute("data-placeholder") || (blank ? blank.textContent : "Type 4090, M4 Max, 24 GB or CPU");
    var list = document.createElement("div");
    list.id = base + "-list";
    list.className = "hw-list";
    list.setAttribute("role", "listbox");
    list.hidden = true;
    var status = document.createElement("span");
    status.className = "sr-only";
    status.setAttribute("role", "status");

    // The choices, read once from the select's groups (blank placeholder left out).
    var entries = [];
    var groups = [];
    Array.prototype.forEach.call(select.querySelectorAll("optgroup"), function (optgroup, g) {
      var group = document.createElement("div");
      group.setAttribute("role", "group");
      group.className = "hw-group";
      var heading = document.createElement("div");
      heading.id = base + "-group-" + g;
      heading.className = "hw-group-label";
      heading.setAttribute("role", "presentation");
      heading.textContent = optgroup.label;
      group.setAttribute("aria-labelledby", heading.id);
      group.appendChild(heading);
      var members = [];
      Array.prototype.forEach.call(optgroup.querySelectorAll("option"), function (option, i) {
        var item = document.createElement("div");
        item.id = base + "-option-" + g + "-" + i;
        item.className = "hw-option";
        item.setAttribute("role", "option");
        item.setAttribute("aria-selected", "false");
        item.textContent = option.textContent;
        var all = words(optgroup.label + " " + option.textContent);
        var entry = { option: option, item: item, words: all, compact: all.join("") };
        entries.push(entry);
        members.push(entry);
        group.appendChild(item);
      });
      groups.push({ element: group, members: members });
      list.appendChild(group);
    });

    var shown = [];
    var active = -1;

    function chosenText() {
      var option = select.options[select.selectedIndex];
      return option && option.value ? option.textContent : "";
    }

    // Scroll the list, never the page, to the marked choice.
    function reveal(item) {
      var top = item.offsetTop;
      var bottom = top + item.offsetHeight;
      if (top < list.scrollTop) list.scrollTop = top;
      else if (bottom > list.scrollTop + list.clientHeight) list.scrollTop = bottom - list.clientHeight;
    }

    function setActive(index) {
      if (active >= 0 && shown[active]) {
        shown[active].item.classList.remove("active");
        shown[active].item.setAttribute("aria-selected", "false");
      }
      active = index;
      if (index >= 0 && shown[index]) {
        var item = shown[index].item;
        item.classList.add("active");
        item.setAttribute("aria-selected", "true");
        input.setAttribute("aria-activedescendant", item.id);
        reveal(item);
      } else {
        input.removeAttribute("aria-activedescendant");
      }
    }

    function filter(text) {
      var query = words(text);
      shown = [];
      groups.forEach(function (group) {
        var any = false;
        group.members.forEach(function (entry) {
          var keep = matches(query, entry);
          entry.item.hidden = !keep;
          if (keep) {
            shown.push(entry);
            any = true;
          }
        });
        group.element.hidden = !any;
      });
      list.classList.toggle("hw-list-empty", shown.length === 0);
      status.textContent = shown.length === 1 ? "1 choice" : shown.length + " choices";
      // Typing makes the first match the one Enter picks; an empty field marks nothing.
      setActive(query.length && shown.length ? 0 : -1);
    }

    function open(text) {
      list.hidden = false;
      input.setAttribute("aria-expanded", "true");
      filter(text);
    }

    function close() {
      list.hidden = true;
      input.setAttribute("aria-expanded", "false");
      setActive(-1);
    }

    function choose(entry) {
      select.value = entry.option.value;
      input.value = entry.option.textContent;
      close();
      select.dispatchEvent(new Event("change", { bubbles: true }));
      if (mode === "submit" && select.form) {
        if (select.form.requestSubmit) select.form.requestSubmit();
        else select.form.submit();
      }
    }

    input.addEventListener("focus", function () {
      input.select();
      open("");
    });
    input.addEventListener("click", function () {
      if (list.hidden) open("");
    });
    input.addEventListener("input", function () {
      open(input.value);
    });
    // The field only looks for a choice; the select is what the form sends.
    input.addEventListener("change", function (event) {
      event.stopPropagation();
    });
    input.addEventListener("keydown", function (event) {
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        event.preventDefault();
        if (list.hidden) open(input.value === chosenText() ? "" : input.value);
        if (!shown.length) return;
        var step = event.key === "ArrowDown" ? 1 : -1;
        setActive((active + step + shown.length) % shown.length);
      } else if (event.key === "Enter") {
        // Never the form's implicit submission with a half-typed name.
        event.preventDefault();
        if (!list.hidden && shown[active]) choose(shown[active]);
        else if (!list.hidden && shown.length) choose(shown[0]);
      } else if (event.key === "Escape" && !list.hidden) {
        event.preventDefault();
        input.value = chosenText();
        close();
      }
    });
    input.addEventListener("blur", function () {
      input.value = chosenText();
      close();
    });
    // Pressing on the list must not take the focus from the field (blur would close it).
    list.addEventListener("mousedown", function (event) {
      event.preventDefault();
    });
    list.addEventListener("click", function (event) {
      var item = event.target.closest('[role="option"]');
      if (!item) return;
      entries.forEach(function (entry) {
        if (entry.item === item) choose(entry);
      });
    });
    // A choice made on the select itself (the back button, a test) shows in the field.
    select.addEventListener("change", function () {
      input.value = chosenText();
    });
    if (select.form && mode === "submit") {
      // The select is hidden, so the browser cannot point at it when nothing is chosen: ask
      // here instead, or take the first match of what was typed.
      select.required = false;
      select.form.addEventListener("submit", function (event) {
        if (select.value) return;
        event.preventDefault();
        filter(input.value);
        if (input.value && shown.length) choose(shown[0]);
        else {
          input.focus();
          open(input.value);
        }
      });
    }

    input.value = chosenText();
    select.classList.add("hw-native");
    select.setAttribute("aria-hidden", "true");
    select.tabIndex = -1;
    if (label) label.htmlFor = input.id;
    box.appendChild(input);
    box.appendChild(list);
    box.appendChild(status);
    select.parentNode.insertBefore(box, select);
  }

  function start() {
    Array.prototype.forEach.call(document.querySelectorAll("select[data-hw-picker]"), enhance);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
  // Back and forward on the board bring back htmx's copy of the page: enhance it again.
  document.addEventListener("htmx:historyRestore", start);
})();
