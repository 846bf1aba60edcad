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
