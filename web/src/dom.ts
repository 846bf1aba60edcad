// A small helper to build DOM elements.

type Child = Node | string | null | undefined | false;

export function h(
  tag: string,
  attributes: Record<string, string | ((event: Event) => void)> = {},
  ...children: (Child | Child[])[]
): HTMLElement {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (typeof value === "function") element.addEventListener(name.replace(/^on/, ""), value);
    else element.setAttribute(name, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    element.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return element;
}

/** What names the focused element inside `root` among the next drawing's (a drawing replaces
 * every element): its tag with its id, or with its `data-` attributes under the seat it sits
 * at; null when nothing in `root` is focused, or nothing names it. */
export function focusKey(root: Element): string | null {
  const active = document.activeElement;
  if (!(active instanceof HTMLElement) || !root.contains(active)) return null;
  const own = (element: Element): string | null => {
    const tag = element.tagName.toLowerCase();
    if (element.id) return `${tag}#${CSS.escape(element.id)}`;
    const data = Array.from(element.attributes).filter((a) => a.name.startsWith("data-"));
    if (!data.length) return null;
    return tag + data.map((a) => `[${a.name}="${CSS.escape(a.value)}"]`).join("");
  };
  const key = own(active);
  if (key === null || active.id) return key;
  const seat = active.parentElement?.closest("[data-seat]");
  const at = seat && root.contains(seat) ? own(seat) : null;
  return at === null ? key : `${at} ${key}`;
}

/** Focus again what `key` (`focusKey`, before the drawing) names, if the drawing kept it. */
export function refocus(root: Element, key: string | null): void {
  if (key === null) return;
  const again = root.querySelector(key);
  if (again instanceof HTMLElement) again.focus({ preventScroll: true });
}
