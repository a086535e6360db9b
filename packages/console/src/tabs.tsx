// Tabs as WAI-ARIA's tabs pattern has them (https://www.w3.org/WAI/ARIA/apg/patterns/tabs/): a
// tablist of buttons, the selected one in the Tab order and the others reached with the arrow
// keys, Home and End (automatic activation), and one panel, the selected tab's. Which tab is
// selected is the caller's (the address's fragment, so that a reload or a link opens it).
import type { ComponentChildren } from 'preact';
import { useId, useRef } from 'preact/hooks';

export function Tabs<T extends string>(props: {
  label: string;
  tabs: readonly { id: T; label: string }[];
  selected: T;
  onSelect: (id: T) => void;
  children: ComponentChildren;
}) {
  const base = useId();
  const list = useRef<HTMLDivElement>(null);
  const tabId = (id: T) => `${base}-tab-${id}`;
  const panelId = `${base}-panel`;
  const select = (index: number) => {
    const tab = props.tabs[(index + props.tabs.length) % props.tabs.length]!;
    props.onSelect(tab.id);
    list.current?.querySelector<HTMLElement>(`[id="${tabId(tab.id)}"]`)?.focus();
  };
  const current = props.tabs.findIndex((t) => t.id === props.selected);
  return (
    <>
      <div
        ref={list}
        role="tablist"
        aria-label={props.label}
        class="tabs"
        onKeyDown={(event) => {
          const keys: Record<string, number> = {
            ArrowRight: current + 1,
            ArrowLeft: current - 1,
            Home: 0,
            End: props.tabs.length - 1,
          };
          const to = keys[event.key];
          if (to === undefined) return;
          event.preventDefault();
          select(to);
        }}
      >
        {props.tabs.map((tab) => {
          const on = tab.id === props.selected;
          return (
            <button
              key={tab.id}
              type="button"
              role="tab"
              id={tabId(tab.id)}
              aria-selected={on}
              aria-controls={on ? panelId : undefined}
              tabIndex={on ? 0 : -1}
              onClick={() => props.onSelect(tab.id)}
            >
              {tab.label}
            </button>
          );
        })}
      </div>
      <div role="tabpanel" id={panelId} aria-labelledby={tabId(props.selected)} class="tabpanel">
        {props.children}
      </div>
    </>
  );
}
